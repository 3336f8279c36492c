package dynamodb

import (
	"regexp"
	"strings"
	"unicode"
)

// tableChars are the characters of a DynamoDB table's name. (A pattern that also counted
// them, {3,255}, compiles to 300 KB held for the life of the process.)
var tableChars = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// IsTableName says whether s is a DynamoDB table's name, 3 to 255 of tableChars, or the ARN
// of a table of such a name: what a table setting may hold.
func IsTableName(s string) bool {
	if rest, ok := strings.CutPrefix(s, "arn:"); ok {
		i := strings.LastIndex(rest, ":table/")
		if i < 1 || strings.ContainsFunc(rest[:i], unicode.IsSpace) {
			return false
		}
		s = rest[i+len(":table/"):]
	}
	return len(s) >= 3 && len(s) <= 255 && tableChars.MatchString(s)
}
