# bash completion for vramshim (installed as
# share/bash-completion/completions/vramshim): commands, each command's
# options and their values, and for dump and top the pids of your processes
# running under the shim: those with a live snapshot in /dev/shm (named
# vramshim-UID-PID, see shim/snapshot_abi.h) whose process still exists.
# Names only, no snapshot is read: completion stays instant.

_vramshim_pids()
{
    local f pid uid
    uid=$(id -u)
    for f in /dev/shm/vramshim-"$uid"-*; do
        pid=${f##*-}
        [[ $pid =~ ^[0-9]+$ && -d /proc/$pid ]] && echo "$pid"
    done
}

_vramshim()
{
    local cur prev cmd i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands="run ps dump top plot metrics"

    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return 0
    fi
    cmd=${COMP_WORDS[1]}

    case $cmd in
    run)
        # After the program's name everything is the program's.
        for ((i = 2; i < COMP_CWORD; i++)); do
            case ${COMP_WORDS[i]} in
            --)
                if ((i == COMP_CWORD - 1)); then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return 0
                ;;
            --limit | --host-limit | --spill-dir | --mode | --log | --shim | --trace) ((i++)) ;;
            -*) ;;
            *) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
            esac
        done
        case $prev in
        --mode) COMPREPLY=($(compgen -W "offload cap" -- "$cur")); return 0 ;;
        --log) COMPREPLY=($(compgen -W "error warn info debug" -- "$cur")); return 0 ;;
        --spill-dir) COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
        --shim | --trace) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        --limit | --host-limit) return 0 ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--limit --host-limit --spill-dir --mode --log --trace --shim --help --" -- "$cur"))
        else
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        ;;
    ps)
        COMPREPLY=($(compgen -W "--bytes --json --help" -- "$cur"))
        ;;
    dump | top)
        case $prev in
        --sort) COMPREPLY=($(compgen -W "id size last-use age state" -- "$cur")); return 0 ;;
        --state) COMPREPLY=($(compgen -W "device host disk" -- "$cur")); return 0 ;;
        --interval | --iterations) return 0 ;;
        esac
        if [[ $cur == -* ]]; then
            if [[ $cmd == dump ]]; then
                COMPREPLY=($(compgen -W "--json --sort --state --bytes --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--interval --iterations --bytes --help" -- "$cur"))
            fi
        else
            COMPREPLY=($(compgen -W "$(_vramshim_pids)" -- "$cur"))
        fi
        ;;
    plot)
        case $prev in
        --format) COMPREPLY=($(compgen -W "svg chrome" -- "$cur")); return 0 ;;
        --x) COMPREPLY=($(compgen -W "auto op time" -- "$cur")); return 0 ;;
        --limit) return 0 ;;
        -o | --output) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-o --output --format --limit --x --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        ;;
    metrics)
        case $prev in
        --listen) COMPREPLY=($(compgen -W "127.0.0.1:9400 :9400" -- "$cur")); return 0 ;;
        esac
        COMPREPLY=($(compgen -W "--listen --help" -- "$cur"))
        ;;
    esac
    return 0
}

complete -F _vramshim vramshim
