package main

import "strconv"

// count returns n and the noun in its number: "1 tool", "3 tools". many
// is the plural form ("" adds an s to one).
func count(n int, one, many string) string {
	if many == "" {
		many = one + "s"
	}
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
