package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// hasDynamoDB says whether a DynamoDB table is configured (instead of Redis).
func (c config) hasDynamoDB() bool { return c.DynamoDBTable != "" }

// tableChars are the characters of a DynamoDB table's name. (A pattern that also counted
// them, {3,255}, compiles to 300 KB held for the life of the process.)
var tableChars = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// isTableName says whether s is a DynamoDB table's name, 3 to 255 of tableChars, or the ARN
// of a table of such a name.
func isTableName(s string) bool {
	if rest, ok := strings.CutPrefix(s, "arn:"); ok {
		i := strings.LastIndex(rest, ":table/")
		if i < 1 || strings.ContainsFunc(rest[:i], unicode.IsSpace) {
			return false
		}
		s = rest[i+len(":table/"):]
	}
	return len(s) >= 3 && len(s) <= 255 && tableChars.MatchString(s)
}

// validateDynamoDB checks the DynamoDB settings. Where to connect, and as whom, are the AWS
// SDK's own settings (AWS_*), which bigseg does not repeat.
func (c config) validateDynamoDB() []error {
	var errs []error
	if !c.hasDynamoDB() {
		if !c.DynamoDBConsistentRead {
			errs = append(errs, errors.New("BIGSEG_DYNAMODB_CONSISTENT_READ is set but no DynamoDB table is: set BIGSEG_DYNAMODB_TABLE"))
		}
		return errs
	}
	if !isTableName(c.DynamoDBTable) {
		errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %.80q is not a table name (3 to 255 of A-Z, a-z, 0-9, _ - .) or a table's ARN", c.DynamoDBTable))
	}
	for _, name := range c.redisTopologies() {
		errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE and %s are both set: choose one store", name))
	}
	if c.SeedFile != "" {
		errs = append(errs, errors.New("BIGSEG_SEED_FILE is for the embedded store, but BIGSEG_DYNAMODB_TABLE is set"))
	}
	return errs
}
