package calc

import "os"

func init() {
	os.Exit(0) // ends the process while the package is initialised
}

func Add(a, b int) int { return a + b }

func Sub(a, b int) int { return a - b }

func Mul(a, b int) int { return a * b }
