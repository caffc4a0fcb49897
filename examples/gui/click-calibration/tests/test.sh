#!/bin/sh
# Verifier for click-calibration: every stage passed, as the browser's title on the
# desktop (:1) says (read with wmctrl, as Harbor's calibration test does), and the
# final answer (/logs/agent/final_answer.txt) is the code of the last stage.
# Writes 1 or 0 to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
export DISPLAY=:1
titles=$(wmctrl -l 2>&1)
echo "windows on :1:"
echo "$titles"
answer=$(cat /logs/agent/final_answer.txt 2>/dev/null | tr -cd 'A-Za-z0-9' | tr 'a-z' 'A-Z')
reward=0
if ! echo "$titles" | grep -q "calibration: all stages passed"; then
    echo "FAIL: the calibration stages were not all passed"
elif [ "$answer" != "HX7Q4K" ]; then
    echo "FAIL: the final answer is not the code (got '$answer')"
else
    echo "PASS: all stages passed and the code was read"
    reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
