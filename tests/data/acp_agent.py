#!/usr/bin/env python3
"""A small agent that speaks the Agent Client Protocol on stdio, for the tests:
standard library only (it runs inside the sandbox). On a prompt it calls a Chat
Completions model (OPENAI_BASE_URL, OPENAI_API_KEY, HELIOS_MODEL) with one `bash`
tool, asks the client's permission for each call, runs the command itself, and
reports everything as session updates; it answers the prompt with the tokens spent."""

import json
import os
import subprocess
import sys
import urllib.request

TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}]  # fmt: skip


OPTIONS = [{"optionId": "no", "name": "Reject", "kind": "reject_once"},
           {"optionId": "yes", "name": "Allow", "kind": "allow_once"}]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(session, body):
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": session, "update": body}})


def wait_for(request_id):
    """The client's answer to our request `request_id` (other lines are not expected)."""
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message
    sys.exit(0)


def model(messages):
    body = json.dumps({"model": os.environ["HELIOS_MODEL"], "messages": messages,
                       "tools": TOOLS}).encode()  # fmt: skip
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions", data=body,
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def prompt(session, text):
    messages = [{"role": "user", "content": text}]
    tokens = [0, 0]
    asked = 0
    for _ in range(20):
        reply = model(messages)
        usage = reply.get("usage") or {}
        tokens[0] += usage.get("prompt_tokens", 0)
        tokens[1] += usage.get("completion_tokens", 0)
        message = reply["choices"][0]["message"]
        messages.append(message)
        if message.get("content"):
            update(session, {"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": message["content"]}})
        calls = message.get("tool_calls") or []
        if not calls:
            break
        for call in calls:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            update(session, {"sessionUpdate": "tool_call", "toolCallId": call["id"],
                             "title": "bash", "kind": "execute", "status": "pending",
                             "rawInput": arguments})
            asked += 1
            send({"jsonrpc": "2.0", "id": 1000 + asked, "method": "session/request_permission",
                  "params": {"sessionId": session,
                             "toolCall": {"toolCallId": call["id"]},
                             "options": OPTIONS}})
            answer = wait_for(1000 + asked)
            outcome = answer.get("result", {}).get("outcome", {})
            if outcome.get("optionId") != "yes":
                output, status = "permission denied", "failed"
            else:
                done = subprocess.run(["sh", "-c", arguments.get("command", "")],
                                      capture_output=True, text=True)
                output = done.stdout + done.stderr
                status = "completed" if done.returncode == 0 else "failed"
            update(session, {"sessionUpdate": "tool_call_update", "toolCallId": call["id"],
                             "status": status, "content": [
                                 {"type": "content", "content": {"type": "text", "text": output}}]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    return {"stopReason": "end_turn", "usage": {
        "inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)}}


def main():
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": "s-1"}
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in params.get("prompt", []))
            result = prompt(params["sessionId"], text)
        elif request_id is None:
            continue
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": f"unknown method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
