package e2e

import (
	"regexp"
	"strings"
)

// regexpLine reports whether any line of out matches the pattern.
func regexpLine(out, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(strings.TrimRight(l, " ")) {
			return true
		}
	}
	return false
}
