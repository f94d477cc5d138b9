# fish completion for gpu-run-ctl. Commands and options are read from gpu-run-ctl's own --help
# at completion time, so they follow the installed version.

# The command path typed so far ("profiles show").
function __gpu_run_ctl_path
    set -l path
    for w in (commandline -opc)[2..-1]
        switch $w
            case '-*'
                continue
            case '*'
                if contains -- $w (__gpu_run_ctl_subcommands $path)
                    set -a path $w
                end
        end
    end
    test (count $path) -gt 0; and printf '%s\n' $path
end

function __gpu_run_ctl_subcommands
    gpu-run-ctl $argv --help 2>/dev/null | sed -n '/^Subcommands:/,/^$/{s/^  \([a-z][a-z0-9-]*\) .*/\1/p}'
end

function __gpu_run_ctl_candidates
    set -l path (__gpu_run_ctl_path)
    if string match -q -- '-*' (commandline -ct)
        gpu-run-ctl $path --help 2>/dev/null | sed -n '/^Options:/,/^$/{s/^  \(-[a-zA-Z],\)\{0,1\}\(--[a-z][a-z0-9-]*\).*/\2/p}'
    else
        __gpu_run_ctl_subcommands $path
    end
end

# True when the word before the cursor is $argv[1] (the option whose value is being typed).
function __gpu_run_ctl_prev_is
    set -l tokens (commandline -opc)
    test (count $tokens) -gt 0; and test "$tokens[-1]" = $argv[1]
end

function __gpu_run_ctl_no_value
    for o in --profile --engine --gpu-request --format --color --profile-dir --log --out-dir --hooks-dir --daemon-json --containerd-config --config --runtime-path --hook-path --self-signed --namespace --image --handler -f --filename --toleration --priority-class --node-selector --label --image-pull-secret --max-unavailable --runbook-url --apiserver-cidr --chain --host-root --profiles
        __gpu_run_ctl_prev_is $o; and return 1
    end
    return 0
end

complete -c gpu-run-ctl -f -n __gpu_run_ctl_no_value -a '(__gpu_run_ctl_candidates)'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --profile' -a '(gpu-run-ctl profiles list --names 2>/dev/null)'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --engine' -a 'docker podman'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --gpu-request' -a 'docker cdi none'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --format' -a 'yaml json'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --color' -a 'auto always never'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --handler' -a 'gpu-run'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --toleration' -a 'all nvidia.com/gpu:NoSchedule'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --priority-class' -a 'system-node-critical system-cluster-critical'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --profile-dir' -a '(__fish_complete_directories)'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --self-signed' -a '(__fish_complete_directories)'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --host-root' -a '(__fish_complete_directories)'
complete -c gpu-run-ctl -f -n '__gpu_run_ctl_prev_is --profiles' -a '(__fish_complete_directories)'
for o in --log --out-dir --hooks-dir --daemon-json --containerd-config --config --runtime-path --hook-path -f --filename
    complete -c gpu-run-ctl -F -n "__gpu_run_ctl_prev_is $o"
end
