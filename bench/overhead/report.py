#!/usr/bin/python3
"""bench/overhead/report.py: medians, ratios and verdicts from the raw results of bench/overhead/run.

    report.py --results DIR [--md bench/OVERHEAD.md]

Reads DIR/{start,hook,wrapper}-round*.json (hyperfine exports; samples of all rounds pooled),
DIR/rss.txt, DIR/callgrind.*.out*, DIR/conditions.json; prints the summary and, with --md,
replaces the section between the markers in that file (creates the file if missing).
"""

import argparse
import glob
import json
import os
import random
import re
import statistics
import sys

BEGIN = "<!-- bench/overhead/run: begin (generated, do not edit by hand) -->"
END = "<!-- bench/overhead/run: end -->"

TARGET_START_RATIO = 1.03  # the hook adds at most 3% to the median container start
TARGET_HOOK_S = 0.002  # the hook runs in at most 2 ms (median)
TARGET_HOOK_RSS_KIB = 4096  # at most 4 MiB peak RSS
TARGET_WRAPPER_S = 0.005  # gpu-run adds at most 5 ms before exec


def load_part(results, part):
    """name -> [seconds...] pooled over the rounds, and name -> [per-round medians]."""
    pooled, per_round, cpu = {}, {}, {}
    for path in sorted(glob.glob(os.path.join(results, f"{part}-round*.json"))):
        with open(path) as f:
            for r in json.load(f)["results"]:
                name = r.get("command_name") or r["command"]
                pooled.setdefault(name, []).extend(r["times"])
                per_round.setdefault(name, []).append(statistics.median(r["times"]))
                cpu.setdefault(name, []).append(r["user"] + r["system"])
    return pooled, per_round, {k: statistics.mean(v) for k, v in cpu.items()}


def quantile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def bootstrap(a, b, stat, n=4000, seed=1):
    """95% CI of stat(median(a), median(b)) by resampling a and b independently."""
    rng = random.Random(seed)
    vals = []
    for _ in range(n):
        ra = [a[rng.randrange(len(a))] for _ in a]
        rb = [b[rng.randrange(len(b))] for _ in b]
        vals.append(stat(statistics.median(ra), statistics.median(rb)))
    vals.sort()
    return vals[int(0.025 * n)], vals[int(0.975 * n) - 1]


def ms(s):
    return f"{s * 1e3:.2f}"


def callgrind_total(path):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def callgrind_self_by_object(path):
    """Self Ir per object file, parsed from the callgrind format (name compression aware)."""
    names, by_ob = {}, {}
    ob, skip = "?", False
    try:
        f = open(path)
    except OSError:
        return {}
    with f:
        for line in f:
            if skip:
                skip = False
                continue
            if line.startswith("ob="):
                m = re.match(r"ob=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    ob = names.get(m.group(1), "?")
                else:
                    ob = line[3:].strip()
                continue
            if line.startswith("cob="):  # names the callee's object; register the name only
                m = re.match(r"cob=\((\d+)\) (.*)", line.rstrip("\n"))
                if m:
                    names[m.group(1)] = m.group(2)
                continue
            if line.startswith("calls="):
                skip = True  # the next line is the call's inclusive cost
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2:
                    by_ob[ob] = by_ob.get(ob, 0) + int(parts[-1])
    return by_ob


# (label, regex on the function column of callgrind_annotate --inclusive=yes); the largest match wins.
HOOK_PARTS = [
    ("ld.so: load + relocate libraries (before main)", r"rtld\.c:_dl_start$"),
    ("ld.so: lazy binding (PLT resolves, all of the run)", r":_dl_runtime_resolve"),
    ("static PIE: self-relocation (before main)", r"_dl_relocate_static_pie$"),
    ("static constructors: libstdc++ iostreams (ios_base::Init)", r"std::ios_base::Init::Init\(\)$"),
    ("static constructors: gpu-run-hook's globals", r"_GLOBAL__sub_I_main$"),
    ("main (everything the hook itself does)", r"^\?\?\?:main$"),
    ("  load_config", r"gpurun::load_config\("),
    ("  probe_host (/proc, cgroups)", r"gpurun::probe_host\("),
    ("  drop_capabilities", r"gpurun::drop_capabilities\("),
    ("  install_seccomp (prctl of the build-time BPF program)", r"gpurun::install_seccomp\("),
    ("    seccomp_load (BPF generation)", r":seccomp_load$"),
    ("  parse_state", r"gpurun::parse_state\("),
    ("  load_spec (config.json)", r"gpurun::load_spec\("),
    ("  spec_facts", r"gpurun::spec_facts\("),
    ("  decide_shm", r"gpurun::decide_shm\("),
    ("    ProfileStore::load (profile + extends)", r"gpurun::ProfileStore::load\("),
    ("      is_valid_profile_name", r"gpurun::is_valid_profile_name\("),
    ("  apply_shm (setns'd: resolve, statfs, remount)", r"gpurun::apply_shm\("),
    ("  Logger::log (all lines)", r"gpurun::Logger::log\("),
    ("all std::regex compiles (anywhere)", r"basic_regex<char, std::__cxx11::regex_traits<char> >::_M_compile\("),
    ("exit handlers", r"exit\.c:exit$"),
]


def inclusive_parts(path, parts):
    rows = []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError:
        return rows
    entries = []
    for line in lines:
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[[^\]]*\])?$", line.rstrip("\n"))
        if m:
            entries.append((int(m.group(1).replace(",", "")), m.group(2)))
    for label, pattern in parts:
        best = max((c for c, fn in entries if re.search(pattern, fn)), default=None)
        if best is not None:
            rows.append((label, best))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--md")
    args = ap.parse_args()
    R = args.results
    with open(os.path.join(R, "conditions.json")) as f:
        cond = json.load(f)

    start, start_rounds, start_cpu = load_part(R, "start")
    hook, _, hook_cpu = load_part(R, "hook")
    wrap, _, wrap_cpu = load_part(R, "wrapper")
    rss = {}
    with open(os.path.join(R, "rss.txt")) as f:
        for line in f:
            name, kib = line.split()
            rss.setdefault(name, []).append(int(kib))

    out = []  # markdown lines
    verdicts = []  # (target, measured, verdict)

    # (a) container start
    base = start["runc-plain"]
    mb = statistics.median(base)
    out += ["### (a) `runc run` of a busybox container (`true`)", "",
            "| variant | runs | median ms | p25–p75 ms | vs plain (median ratio, 95% CI) | Δ median ms | per-round ratios | CPU ms (user+sys, mean) |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    ratio_hook = None
    over_noop = None
    for name in ["runc-plain", "runc-noop-hook", "runc-hook", "runtime", "runc-shell-hook"]:
        xs = start.get(name)
        if not xs:
            continue
        m = statistics.median(xs)
        if name == "runc-plain":
            rat, d, rr = "1", "", ""
        else:
            lo, hi = bootstrap(xs, base, lambda a, b: a / b)
            rat = f"{m / mb:.3f} [{lo:.3f}, {hi:.3f}]"
            d = f"{(m - mb) * 1e3:+.2f}"
            rr = " ".join(f"{a / b:.3f}" for a, b in zip(start_rounds[name], start_rounds["runc-plain"]))
            if name == "runc-hook":
                ratio_hook = (m / mb, lo, hi)
                noop = start.get("runc-noop-hook")
                if noop:
                    mn = statistics.median(noop)
                    nlo, nhi = bootstrap(noop, base, lambda a, b: a / b)
                    hlo, hhi = bootstrap(xs, noop, lambda a, b: a / b)
                    over_noop = (mn / mb, nlo, nhi, m / mn, hlo, hhi, m - mn)
        out.append(f"| {name} | {len(xs)} | {ms(m)} | {ms(quantile(xs, .25))}–{ms(quantile(xs, .75))} | {rat} | {d} | {rr} | {ms(start_cpu[name])} |")
    out.append("")

    # (b) the hook alone
    floor = hook.get("exec-floor", [])
    mf = statistics.median(floor) if floor else 0
    out += ["### (b) the hook alone, against a live container (hyperfine, shell spawn subtracted)", "",
            "| variant | runs | median ms | p25–p75 ms | minus exec floor ms | CPU ms (user+sys, mean) | peak RSS KiB (median / max) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name in ["exec-floor", "hook-load-only", "hook-resize", "hook-unchanged", "hook-explicit", "shell-hook"]:
        xs = hook.get(name)
        if not xs:
            continue
        m = statistics.median(xs)
        r = rss.get(name)
        rtxt = f"{statistics.median(r):.0f} / {max(r)}" if r else ""
        out.append(f"| {name} | {len(xs)} | {ms(m)} | {ms(quantile(xs, .25))}–{ms(quantile(xs, .75))} | "
                   f"{ms(m - mf) if name != 'exec-floor' else ''} | {ms(hook_cpu[name])} | {rtxt} |")
    out.append("")

    hook_ir = callgrind_total(os.path.join(R, "callgrind.hook.out"))
    parts = inclusive_parts(os.path.join(R, "callgrind.hook.inclusive.txt"), HOOK_PARTS)
    by_ob = callgrind_self_by_object(os.path.join(R, "callgrind.hook.out"))
    if hook_ir:
        out += [f"Instructions of one createRuntime run (callgrind, user space only, runc → valgrind → hook): "
                f"**{hook_ir:,}**.", "",
                "| where (inclusive; nested rows are part of the row above) | Ir | share |", "|---|---:|---:|"]
        for label, c in parts:
            pad = len(label) - len(label.lstrip(" "))
            out.append(f"| {'&nbsp;' * 2 * pad}{label.strip()} | {c:,} | {100 * c / hook_ir:.1f}% |")
        out += ["", "| object (self Ir) | Ir | share |", "|---|---:|---:|"]
        for ob, c in sorted(by_ob.items(), key=lambda kv: -kv[1]):
            if c * 200 < hook_ir:
                continue
            out.append(f"| {os.path.basename(ob)} | {c:,} | {100 * c / hook_ir:.1f}% |")
        out.append("")
    else:
        out += ["Callgrind of the hook: no profile (see callgrind.hook.stderr in the results).", ""]

    # (c) gpu-run before exec
    direct = wrap.get("docker-direct", [])
    out += ["### (c) `gpu-run` up to exec'ing the engine (`docker` = a copy of /bin/true)", "",
            "| variant | runs | median ms | p25–p75 ms | minus docker-direct ms (95% CI) | CPU ms (user+sys, mean) |",
            "|---|---:|---:|---:|---:|---:|"]
    wrapper_delta = None
    for name in ["docker-direct", "gpu-run-exec", "gpu-run-dry-run"]:
        xs = wrap.get(name)
        if not xs:
            continue
        m = statistics.median(xs)
        d = ""
        if name != "docker-direct" and direct:
            lo, hi = bootstrap(xs, direct, lambda a, b: a - b)
            d = f"{ms(m - statistics.median(direct))} [{ms(lo)}, {ms(hi)}]"
            if name == "gpu-run-exec":
                wrapper_delta = (m - statistics.median(direct), lo, hi)
        out.append(f"| {name} | {len(xs)} | {ms(m)} | {ms(quantile(xs, .25))}–{ms(quantile(xs, .75))} | {d} | {ms(wrap_cpu[name])} |")
    gr_ir = callgrind_total(os.path.join(R, "callgrind.gpu-run.out.1"))
    dk_ir = callgrind_total(os.path.join(R, "callgrind.docker.out"))
    if gr_ir:
        out += ["", f"Instructions of gpu-run up to its execve (callgrind --dump-before=execve): **{gr_ir:,}**"
                + (f"; the no-op docker itself: {dk_ir:,}." if dk_ir else ".")]
        gparts = inclusive_parts(os.path.join(R, "callgrind.gpu-run.inclusive.txt"), [
            ("ld.so: load + relocate libraries", r"rtld\.c:_dl_start$"),
            ("std::regex compiles", r"basic_regex<char, std::__cxx11::regex_traits<char> >::_M_compile\("),
            ("probe_host", r"gpurun::probe_host\(")])
        if gparts:
            out.append("Of which " + ", ".join(f"{l}: {c:,} ({100 * c / gr_ir:.0f}%)" for l, c in gparts) + ".")
    out.append("")

    # Verdicts
    if ratio_hook:
        r, lo, hi = ratio_hook
        mh = statistics.median(hook["hook-resize"]) if hook.get("hook-resize") else None
        if hi <= TARGET_START_RATIO:
            v, how = "PASS", f"+{(r - 1) * 100:.1f}% (95% CI {(lo - 1) * 100:+.1f}%..{(hi - 1) * 100:+.1f}%)"
        elif lo > TARGET_START_RATIO:
            v, how = "MISS", f"+{(r - 1) * 100:.1f}% (95% CI {(lo - 1) * 100:+.1f}%..{(hi - 1) * 100:+.1f}%)"
        elif mh is not None:
            est = mh / mb
            v = "PASS" if est <= TARGET_START_RATIO - 1 else "MISS"
            how = (f"start ratio {r:.3f}, CI [{lo:.3f}, {hi:.3f}] straddles 1.03: decided on the hook's own "
                   f"time / plain start = {ms(mh)} / {ms(mb)} ms = +{est * 100:.1f}%")
        else:
            v, how = "UNDECIDED", f"ratio {r:.3f} [{lo:.3f}, {hi:.3f}]"
        verdicts.append(("hook adds <= 3% to the median container start", how, v))
        if over_noop:
            nr, nlo, nhi, hr, hlo, hhi, dm = over_noop
            verdicts.append(("(context) a no-op hook, /bin/true, adds to the start",
                             f"{(nr - 1) * 100:+.1f}% (95% CI {(nlo - 1) * 100:+.1f}%..{(nhi - 1) * 100:+.1f}%)",
                             "runc's cost of any hook"))
            verdicts.append(("(context) gpu-run-hook over the no-op hook",
                             f"{(hr - 1) * 100:+.1f}% (95% CI {(hlo - 1) * 100:+.1f}%..{(hhi - 1) * 100:+.1f}%), "
                             f"{dm * 1e3:+.2f} ms", "gpu-run-hook's own share"))
    if hook.get("hook-resize"):
        mh = statistics.median(hook["hook-resize"])
        verdicts.append(("hook median wall time <= 2 ms (resize path)", f"{ms(mh)} ms", "PASS" if mh <= TARGET_HOOK_S else "MISS"))
    if rss.get("hook-resize"):
        rk = statistics.median(rss["hook-resize"])
        verdicts.append(("hook peak RSS <= 4 MiB (4096 KiB)", f"{rk:.0f} KiB (max {max(rss['hook-resize'])})",
                         "PASS" if rk <= TARGET_HOOK_RSS_KIB else "MISS"))
    if wrapper_delta:
        d, lo, hi = wrapper_delta
        verdicts.append(("gpu-run adds <= 5 ms before exec", f"{ms(d)} ms (95% CI {ms(lo)}..{ms(hi)})",
                         "PASS" if d <= TARGET_WRAPPER_S else "MISS"))

    head = ["| target | measured | verdict |", "|---|---|---|"]
    head += [f"| {t} | {m} | " + (f"**{v}**" if v in ("PASS", "MISS", "UNDECIDED") else v) + " |" for t, m, v in verdicts]
    cond_lines = [
        f"- date: {cond['date']}; kernel {cond['kernel']}; CPUs: {cond['cpu']}; load average at the end: {cond['loadavg']}",
        f"- {cond['runc']}; {cond['hyperfine']}; {cond['valgrind']}; build: {cond['compiler']}",
        f"- runs: {cond['rounds']} interleaved rounds × {cond['runs_start']} (a) / {cond['runs_hook']} (b) / "
        f"{cond['runs_wrapper']} (c) per variant, pooled; plan sized by the hook: {cond['plan']} (imagenet, 2 GPUs)",
        f"- gpu-run-hook: {cond['hook_size_bytes']:,} bytes, " + (f"links {cond['hook_libs'].strip()}" if cond['hook_libs'].strip() else "static PIE (no shared libraries)"),
    ]
    section = ([BEGIN, "## Container start overhead (`bench/overhead/run`)", "",
                "Reproduce: `sudo bench/overhead/run` (method and findings: [overhead/NOTES.md](overhead/NOTES.md)). "
                "Numbers of one run; compare ratios and instruction counts, not absolute times.", ""]
               + cond_lines + [""] + head + [""] + out + [END])

    # Console summary
    print()
    print("bench/overhead: summary")
    for l in cond_lines:
        print("  " + l[2:])
    print()
    w = max(len(t) for t, _, _ in verdicts) if verdicts else 10
    for t, m, v in verdicts:
        print(f"  {v if v in ('PASS', 'MISS', 'UNDECIDED') else '':9} {t:<{w}}  {m}")
    print()
    for l in out:
        if l.startswith("|---"):
            continue
        print("  " + l.replace("**", "").replace("&nbsp;", " "))

    if args.md:
        text = ""
        if os.path.exists(args.md):
            with open(args.md) as f:
                text = f.read()
        block = "\n".join(section) + "\n"
        if BEGIN in text and END in text:
            pre, rest = text.split(BEGIN, 1)
            post = rest.split(END, 1)[1].lstrip("\n")
            text = pre + block + ("\n" + post if post else "")
        else:
            if not text:
                text = "# gpu-run: overhead\n\n"
            text = text.rstrip("\n") + "\n\n" + block
        with open(args.md, "w") as f:
            f.write(text)
        print(f"wrote {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
