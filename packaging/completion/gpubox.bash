# bash completion for gpubox. Options come from `gpubox CMD --help`, the same table that the
# parser and gpubox(1) use; GPU specs from `gpubox list --json`.
_gpubox_opts() {  # CMD: "--opt ARG" or "--opt" per line
    "$1" $2 --help 2>/dev/null | sed -nE 's/^  (-[^ ,]+)( ([^ ]+))?.*/\1 \3/p' | sed -E 's/ (this|-h)$//; s/ $//'
}
_gpubox_gpus() {
    local cmd=$1
    printf '%s\n' none all
    "$cmd" list --json 2>/dev/null | sed -nE 's/^ *"(index|uuid|pci)": "?([^",]+)"?,?$/\2/p' | grep -v '^null$'
}
_gpubox() {
    local cur prev cmd=${COMP_WORDS[0]} sub="" i w
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ -z $sub && $w != -* ]]; then
            sub=$w
            [[ $sub == rootfs ]] && ((i + 1 < COMP_CWORD)) && [[ ${COMP_WORDS[i+1]} == create ]] && { sub="rootfs create"; ((i++)); }
            break
        fi
    done
    if [[ -z $sub ]]; then
        COMPREPLY=($(compgen -W "run pull images rmi check list doctor rootfs help --help --version" -- "$cur"))
        return
    fi
    if [[ $sub == rootfs ]]; then COMPREPLY=($(compgen -W "create" -- "$cur")); return; fi
    # rmi: the pulled images' names.
    if [[ $sub == rmi ]]; then COMPREPLY=($(compgen -W "$("$cmd" images 2>/dev/null | awk 'NR > 1 { print $1 }')" -- "$cur")); return; fi
    if [[ $sub == help ]]; then COMPREPLY=($(compgen -W "run pull images rmi check list doctor rootfs" -- "$cur")); return; fi
    # The value of an option that takes one.
    local arg
    arg=$(_gpubox_opts "$cmd" "$sub" | awk -v o="$prev" '$1 == o { print $2 }')
    if [[ -n $arg ]]; then
        case $prev in
            --gpu) COMPREPLY=($(compgen -W "$(_gpubox_gpus "$cmd")" -- "${cur##*,}"))
                   [[ $cur == *,* ]] && COMPREPLY=("${COMPREPLY[@]/#/${cur%,*},}") ;;
            --gpu-caps) COMPREPLY=($(compgen -W "compute utility graphics video display ngx all" -- "$cur")) ;;
            --meta-format) COMPREPLY=($(compgen -W "json isolate" -- "$cur")) ;;
            --cgroup) COMPREPLY=($(compgen -W "auto off" -- "$cur")) ;;
            --preflight) COMPREPLY=($(compgen -W "warn enforce off" -- "$cur")) ;;
            --workdir | --tmpfs) COMPREPLY=() ;;  # a path inside the sandbox
            *) case $arg in
                   DIR | FILE | PATH | SRC:DST) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
                   *) COMPREPLY=() ;;
               esac ;;
        esac
        return
    fi
    # run: after ROOTFS comes CMD and its own arguments: complete files.
    if [[ $cur == -* ]]; then
        local seen_operand=0 j
        for ((j = i + 1; j < COMP_CWORD; j++)); do
            w=${COMP_WORDS[j]}
            [[ $w == -* ]] && continue
            [[ -n $(_gpubox_opts "$cmd" "$sub" | awk -v o="${COMP_WORDS[j-1]}" '$1 == o && $2 != "" { print 1 }') ]] && continue
            seen_operand=1
        done
        if ((!seen_operand)); then
            COMPREPLY=($(compgen -W "$(_gpubox_opts "$cmd" "$sub" | cut -d' ' -f1) --help" -- "$cur"))
            return
        fi
    fi
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _gpubox gpubox
