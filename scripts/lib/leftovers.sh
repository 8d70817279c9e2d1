# Sourced by run-tests.sh: the processes a test run left behind.
#
# leftover_pids MARKER
#   Prints the pid of every live process whose environment holds AUDIO_TEST_RUN=MARKER: everything the run started
#   (brokers, bridges, hub-sim, accessoryctl, their watchdogs), however deep, inherits it. Run it from a process that
#   does not carry the marker (`env -u AUDIO_TEST_RUN`), or it finds itself. Zombies have no environment left.

leftover_pids() {
    local marker=$1 environ pid
    for environ in /proc/[0-9]*/environ; do
        pid=${environ#/proc/}
        pid=${pid%/environ}
        [ "$pid" != "$$" ] || continue
        # A process may end while this looks: its environment is then gone, which is fine.
        if { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF "AUDIO_TEST_RUN=$marker"; then
            echo "$pid"
        fi
    done
}
