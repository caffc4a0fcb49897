#!/bin/sh
# A tiny MCP server over stdio in POSIX sh (the test images have no python3).
# $1 picks a behaviour: hello (default), huge-list, huge-result, garbage, silent.
# Builtins only: a service's child process of another program (sed, head) may be
# killed by the sandbox's cleanup after any command (Environment.start_service).
mode=${1:-hello}
field() {  # the JSON value after "$1": in $line (numbers, or strings without quotes)
  rest=${line#*\"$1\":}
  [ "$rest" = "$line" ] && { value=; return; }
  rest=${rest#\"}
  value=${rest%%[\",\}]*}
}
while IFS= read -r line; do
  field id; id=$value
  field method; method=$value
  case "$method" in
    initialize)
      field protocolVersion
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"hello-mcp","version":"1.0"}}}\n' "$id" "$value" ;;
    notifications/*) ;;
    tools/list)
      if [ "$mode" = huge-list ]; then
        printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[' "$id"
        i=0; while [ $i -lt 300 ]; do
          printf '{"name":"t%s","description":"tool %s","inputSchema":{"type":"object"}},' $i $i; i=$((i+1)); done
        printf '{"name":"get_secret","description":"Returns the secret","inputSchema":{"type":"object","properties":{}}}]}}\n'
      else
        printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"get_secret","description":"Returns the secret word","inputSchema":{"type":"object","properties":{}}}]}}\n' "$id"
      fi ;;
    tools/call)
      case "$mode" in
        huge-result)
          text=a; i=0; while [ $i -lt 21 ]; do text=$text$text; i=$((i+1)); done  # 2 MiB
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}],"isError":false}}\n' "$id" "$text" ;;
        garbage) printf 'this is {not json-rpc\n' ;;
        silent) ;;
        *) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"The secret word is PAPAYA-42"}],"isError":false}}\n' "$id" ;;
      esac ;;
    *) [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method %s"}}\n' "$id" "$method" ;;
  esac
done
