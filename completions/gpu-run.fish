# fish completion for gpu-run. Profile names come from `gpu-run-ctl profiles list --names`
# (with any --profile-dir already typed); docker's own options are left to the user.

function __gpu_run_profiles
    set -l dirs
    set -l tokens (commandline -opc)
    for i in (seq (count $tokens))
        if test "$tokens[$i]" = --profile-dir; and test $i -lt (count $tokens)
            set -a dirs --profile-dir $tokens[(math $i + 1)]
        end
    end
    gpu-run-ctl profiles list --names $dirs 2>/dev/null
end

complete -c gpu-run -l profile -r -a '(__gpu_run_profiles)' -d 'Workload profile (name or FILE.json)'
complete -c gpu-run -l gpus -x -a 'all 1 2 4 8 device=' -d 'GPU ranks, Docker syntax'
complete -c gpu-run -l workers -x -d 'DataLoader workers per GPU'
complete -c gpu-run -l batch-size -x -d 'Batch size per GPU'
complete -c gpu-run -l prefetch-factor -x -d 'DataLoader prefetch_factor'
complete -c gpu-run -l profile-dir -x -a '(__fish_complete_directories)' -d 'Look for profiles here first'
complete -c gpu-run -l engine -x -a 'docker podman' -d 'Container engine'
complete -c gpu-run -l gpu-request -x -a 'docker cdi none' -d 'How --gpus reaches the engine'
complete -c gpu-run -l dry-run -d 'Print the engine command and start nothing'
complete -c gpu-run -l explain -d 'Print the sizing breakdown, then run'
complete -c gpu-run -l json -d 'Print the plan and argv as JSON, start nothing'
complete -c gpu-run -l record -d 'Sample the peak /dev/shm and append it to the performance log'
complete -c gpu-run -l guard -d 'Grow /dev/shm in place while the job runs, before it fills'
complete -c gpu-run -l over-budget -d 'Keep an explicit --shm-size over the memory budget: a person chose it'
complete -c gpu-run -l timeline -r -F -d 'With --record or --guard: draw /dev/shm over time as an SVG'
complete -c gpu-run -l help -d 'Show help'
complete -c gpu-run -l version -d 'Show the version'
