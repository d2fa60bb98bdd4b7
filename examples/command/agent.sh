#!/bin/sh
# A stand-in for an agent CLI, so the example runs offline: `sh agent.sh PROMPT`.
# harness runs it once per attempt in the workspace and takes its stdout as the answer.
#
# Like a careless agent, it claims success on the first prompt without doing anything. When the
# prompt is harness's retry prompt ("VERIFICATION FAILED ..."), it does the work for real.
prompt=$1
case $prompt in
*"VERIFICATION FAILED"*)
    printf 'hi\n' > hello.txt
    echo "Created hello.txt containing hi."
    ;;
*)
    echo "Done, I created hello.txt."
    ;;
esac
