#!/bin/sh
# Oracle for click-calibration: each stage's target is found by its colour in a
# screenshot, as a scripted model would, and driven with xdotool on the desktop
# (:1) that Helios started before the agent. Each stage waits for the title to
# name the next one: conditions, never a clock.
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

# wait_title TEXT: the browser window's title contains TEXT
wait_title() {
    ends=$(($(date +%s) + WAIT))
    until wmctrl -l | grep -q "$1"; do
        in_time "$ends" || { echo "title never showed '$1'" >&2; return 1; }
        sleep 0.05
    done
}

wait_title "stage 1/8"
set -- $(locate '#ff0000'); xdotool mousemove "$1" "$2" click 1
wait_title "stage 2/8"
set -- $(locate '#00b000'); xdotool mousemove "$1" "$2" click --repeat 2 --delay 60 1
wait_title "stage 3/8"
set -- $(locate '#0040ff'); xdotool mousemove "$1" "$2" click 3
wait_title "stage 4/8"
set -- $(locate '#ff8c00'); xdotool mousemove "$1" "$2" click 1
xdotool type --delay 10 -- helios
wait_title "stage 5/8"
xdotool key ctrl+Return
wait_title "stage 6/8"
set -- $(locate '#8000ff') $(locate '#007070')
xdotool mousemove "$1" "$2" mousedown 1 \
    mousemove $(( ($1 * 3 + $3) / 4 )) $(( ($2 * 3 + $4) / 4 )) \
    mousemove $(( ($1 + $3) / 2 )) $(( ($2 + $4) / 2 )) \
    mousemove "$3" "$4" mouseup 1
wait_title "stage 7/8"
i=0
until wmctrl -l | grep -q "all stages passed"; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || { echo "the scroll never reached the cyan bar" >&2; exit 1; }
    xdotool mousemove 512 500 click 5
done
# The code: the reference solution knows it (a model reads it from a zoom).
locate '#ff00ff' >/dev/null
mkdir -p /logs/agent
printf 'HX-7Q4K' > /logs/agent/final_answer.txt
