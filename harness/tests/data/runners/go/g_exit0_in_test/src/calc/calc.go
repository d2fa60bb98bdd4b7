package calc

import "os"

func Add(a, b int) int { return a + b }

func Sub(a, b int) int {
	os.Exit(0) // ends the process while TestSub runs
	return a - b
}

func Mul(a, b int) int { return a * b }
