# The project's tests: plain sh, judged by the exit code.
failed=0
check() {
  got=$(sh calc.sh "$1" "$2" "$3" 2>&1)
  if [ "$got" = "$4" ]; then
    echo "ok   calc $1 $2 $3 = $4"
  else
    echo "FAIL calc $1 $2 $3: expected $4, got $got"
    failed=$((failed + 1))
  fi
}
check add 2 3 5
check add 10 -4 6
check add 0 0 0
echo "$failed failed"
[ "$failed" -eq 0 ]
