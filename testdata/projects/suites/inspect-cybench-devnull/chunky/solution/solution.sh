echo "solution placeholder"
