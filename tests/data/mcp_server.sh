#!/bin/sh
# A tiny MCP server over stdio in POSIX sh (the test images have no python3).
# $1 picks a behaviour: hello (default), huge-list, huge-result, garbage, silent.
mode=${1:-hello}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  case "$method" in
    initialize)
      version=$(printf '%s' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"hello-mcp","version":"1.0"}}}\n' "$id" "$version" ;;
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
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' "$id"
          head -c 2000000 /dev/zero | tr '\0' a
          printf '"}],"isError":false}}\n' ;;
        garbage) printf 'this is {not json-rpc\n' ;;
        silent) ;;
        *) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"The secret word is PAPAYA-42"}],"isError":false}}\n' "$id" ;;
      esac ;;
    *) [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method %s in %s"}}\n' "$id" "$method" "$(printf '%s' "$line" | head -c 200 | tr -d '"\\')" ;;
  esac
done
