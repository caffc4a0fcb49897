#!/bin/sh
# Oracle for browser-form: finds each control by its colour in a screenshot, as a
# scripted model would, and drives it with xdotool on the desktop (:1) that Helios
# started before the agent. It waits on what the screen shows, never on a clock.
set -eu
export DISPLAY=:1
CONVERT=/usr/bin/convert
[ -x "$CONVERT" ] || CONVERT=convert
SHOT=/tmp/oracle-shot.png

# Every wait has a deadline (a loaded machine is slow, never stuck forever).
WAIT=120
in_time() { [ "$(date +%s)" -lt "$1" ]; }

# locate COLOUR: prints "X Y", the centre of the screen's pixels of exactly that
# colour, once it is on the screen.
locate() {
    ends=$(($(date +%s) + WAIT))
    while in_time "$ends"; do
        import -silent -window root "$SHOT"
        box=$("$CONVERT" "$SHOT" -alpha off -fill black +opaque "$1" -format '%@' info: 2>/dev/null || true)
        w=${box%%x*}; rest=${box#*x}; h=${rest%%+*}; rest=${rest#*+}; x=${rest%%+*}; y=${rest#*+}
        if [ "${w:-0}" -gt 4 ] && [ "${h:-0}" -gt 4 ]; then
            echo "$((x + w / 2)) $((y + h / 2))"
            return 0
        fi
        sleep 0.05
    done
    echo "colour $1 never appeared" >&2
    return 1
}

click_on() {  # click_on COLOUR
    set -- $(locate "$1")
    xdotool mousemove "$1" "$2" click 1
}

# wait_title TEXT: the browser window's title contains TEXT
wait_title() {
    ends=$(($(date +%s) + WAIT))
    until wmctrl -l | grep -q "$1"; do
        in_time "$ends" || { echo "title never showed '$1'" >&2; return 1; }
        sleep 0.05
    done
}

wait_title "Sign-up form"
click_on '#ffd500'
xdotool type --delay 10 -- "Ada Lovelace"
click_on '#00c8ff'
xdotool type --delay 10 -- "ada@example.org"
click_on '#30c030'
click_on '#e000e0'
click_on '#ff8000'
wait_title "Form accepted"
