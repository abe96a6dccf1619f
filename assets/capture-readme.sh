#!/bin/sh
# Regenerates the board picture in README.md from real output: runs `baton --demo` in a
# detached tmux session of 100x30, waits until a demo task reaches the approval gate with its
# handoff on screen, captures the pane as text and puts it between the
# `<!-- screenshot:start -->` and `<!-- screenshot:end -->` lines of README.md.
#
#   assets/capture-readme.sh            # uses target/debug/baton (builds it if missing)
#   BATON_BIN=path assets/capture-readme.sh
set -eu
cd "$(dirname "$0")/.."
bin=${BATON_BIN:-target/debug/baton}
[ -x "$bin" ] || cargo build --bin baton
command -v tmux >/dev/null || { echo "capture-readme: tmux is not installed" >&2; exit 1; }
sock=baton-capture-$$
shot=$(mktemp)
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -f "$shot"' EXIT
tmux -L "$sock" -f /dev/null new-session -d -x 100 -y 30 \
    "env NO_COLOR=1 XDG_CONFIG_HOME=/nonexistent $bin --demo"
wait_for() {
    i=0
    until tmux -L "$sock" capture-pane -p | grep -q "$1"; do
        i=$((i + 1)); [ $i -lt 600 ] || { echo "capture-readme: never saw '$1'" >&2; exit 1; }
        sleep 0.1
    done
}
# Every started demo task at the approval gate, then the selection moved there so the detail
# pane shows a task that went through the whole pipeline.
wait_for '5 need approval'
tmux -L "$sock" send-keys l l l l l
wait_for '#5 Upgrade the HTTP client · Review'
wait_for 'OUTCOME: success'
tmux -L "$sock" capture-pane -p | sed -e 's/[[:space:]]*$//' > "$shot"
tmux -L "$sock" send-keys q
tmux -L "$sock" send-keys y
awk -v shot="$shot" '
    /<!-- screenshot:start -->/ { print; print "```text"; while ((getline l < shot) > 0) print l; print "```"; skip = 1; next }
    /<!-- screenshot:end -->/ { skip = 0 }
    !skip { print }
' README.md > README.md.new
mv README.md.new README.md
echo "capture-readme: README.md updated"
