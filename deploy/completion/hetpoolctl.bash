# bash completion for hetpoolctl (installed to /usr/share/bash-completion/completions/hetpoolctl).
# Completes commands, global and per-command flags, flag values with a fixed set, and job ids and
# node names from the pool (asked with a short timeout; nothing is offered when it does not answer).

_hetpoolctl_query() {
  # $1: list | nodes. Uses the same server, CA and token as the command line being completed.
  local -a globals=()
  local i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --server | --tls-ca | --token | --token-file) globals+=("${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}") ;;
      --insecure) globals+=(--insecure) ;;
    esac
  done
  hetpoolctl "${globals[@]}" --timeout 2s "$1" 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_hetpoolctl() {
  local cur prev command i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  local commands="submit get list cancel logs watch wait nodes devices fingerprints plan usage drain undrain admin"
  local globals="--server --tls-ca --tls-cert --tls-key --token --token-file --insecure -o --output --timeout --help"

  # The command is the first word that is neither a global flag nor its value.
  command=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --server | --tls-ca | --tls-cert | --tls-key | --token | --token-file | -o | --output | --timeout) ((i++)) ;;
      -*) ;;
      *) command=${COMP_WORDS[i]}; break ;;
    esac
  done

  case "$prev" in
    -o | --output) COMPREPLY=($(compgen -W "table json csv" -- "$cur")); return ;;
    --tls-ca | --tls-cert | --tls-key | --token-file | -f | --file | --config | --prices | --junit) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --state) COMPREPLY=($(compgen -W "pending scheduled running succeeded failed cancelled" -- "$cur")); return ;;
    --by) COMPREPLY=($(compgen -W "job user group class" -- "$cur")); return ;;
    --role) COMPREPLY=($(compgen -W "viewer user operator admin" -- "$cur")); return ;;
    --mode) COMPREPLY=($(compgen -W "train infer" -- "$cur")); return ;;
    --precision) COMPREPLY=($(compgen -W "fp32 bf16 fp16 fp8 int8 int4" -- "$cur")); return ;;
    --objective) COMPREPLY=($(compgen -W "cost time now" -- "$cur")); return ;;
    --vendor) COMPREPLY=($(compgen -W "nvidia metax cambricon intel cpu" -- "$cur")); return ;;
  esac

  if [ -z "$command" ]; then
    if [[ "$cur" == -* ]]; then
      COMPREPLY=($(compgen -W "$globals" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    fi
    return
  fi

  local flags=""
  case "$command" in
    submit) flags="-f --file --request-id --skip-script-check --help" ;;
    list) flags="--state --user --label --help" ;;
    cancel) flags="--reason --help" ;;
    logs) flags="-f --follow --node --rank --raw --help" ;;
    wait) flags="--timeout --job-exit-code --junit --help" ;;
    watch) flags="--job-exit-code --help" ;;
    devices) flags="--node --vendor --help" ;;
    plan) flags="--model --config --mode --precision --seq --tokens --zero --batch --context --micro-batch --grad-accum --objective --cards --optimizer --mixed --recompute --attention --dropout --kv-precision --lora-rank --lora-all-linear --no-sequence-parallel --pool --prices --list-models --help" ;;
    usage) flags="--since --until --by --help" ;;
    admin) flags="token revoke --file --user --group --role --comment --help" ;;
  esac
  if [[ "$cur" == -* ]] || [ "$command" = admin ]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  case "$command" in
    get | cancel | logs | watch | wait) COMPREPLY=($(compgen -W "$(_hetpoolctl_query list)" -- "$cur")) ;;
    drain | undrain) COMPREPLY=($(compgen -W "$(_hetpoolctl_query nodes)" -- "$cur")) ;;
  esac
}
complete -F _hetpoolctl hetpoolctl
