# Sourced by examples/preemption_demo.sh and examples/preemption_gpt.sh.
#
# kill_between_checkpoints PID RANK EVERY STEP_LOG: SIGKILL the training
# process PID (rank RANK, checkpointing every EVERY steps, logging
# "train GROUP RANK ..." lines to STEP_LOG) at a step that is not a
# checkpoint's, so that the steps it trained past its last checkpoint are
# discarded with it. The rank is frozen (SIGSTOP) before its step is read,
# so that it dies at the step read, however far behind the log the caller's
# polling runs on a loaded machine. EVERY must be at least 2.
kill_between_checkpoints() {
    local pid=$1 rank=$2 every=$3 log=$4 step
    while :; do
        kill -STOP "$pid"
        step=$(grep -c "^train [0-9]* $rank " "$log" || true)
        [ $((step % every)) -ne 0 ] && break
        kill -CONT "$pid"
        sleep 0.05
    done
    echo "kill -9 of rank $rank (pid $pid) after $step steps"
    kill -9 "$pid"
}
