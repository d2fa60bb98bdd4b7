# Sourced by the benchmark scripts: starts the fake OpenAI server of `harness-bench` on a free
# loopback port and waits for the address it reports.
#
#   start_fake_openai BIN_DIR WORK   sets server_pid (for the caller's cleanup trap) and url
#
# The server exits by itself after an hour even if the caller is killed before its trap runs.
start_fake_openai() {
    local bin=$1 work=$2
    "$bin/fake-openai" 0 --lifetime 3600 >"$work/server.out" 2>"$work/server.err" &
    server_pid=$!
    url=
    for _ in $(seq 1 100); do
        url=$(head -n 1 "$work/server.out" 2>/dev/null || true)
        [[ -n $url ]] && return 0
        kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
        sleep 0.1
    done
    echo "fake-openai did not report its address" >&2
    exit 1
}
