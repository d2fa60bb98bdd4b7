case "$1" in
  add) echo $(( $2 - $3 )) ;;
esac
