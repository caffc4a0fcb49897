#!/bin/sh
# Verifier for browser-form: the form was accepted, as the browser's title on the
# desktop (:1) says (read with wmctrl, as Harbor's computer-use tests do).
# Writes 1 or 0 to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
export DISPLAY=:1
titles=$(wmctrl -l 2>&1)
echo "windows on :1:"
echo "$titles"
reward=0
if echo "$titles" | grep -q "Form accepted: ada@example.org on pro"; then
    echo "PASS: the form was accepted"
    reward=1
else
    echo "FAIL: no accepted form in the browser's title"
fi
echo "$reward" > /logs/verifier/reward.txt
