package dynamodb_test

import (
	"strings"
	"testing"

	"github.com/bigseg/bigseg/storage/dynamodb"
)

func TestTableNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"bigseg", true},
		{"a.b_c-D9", true},
		{"abc", true},
		{strings.Repeat("t", 255), true},
		{"arn:aws:dynamodb:eu-west-1:123456789012:table/bigseg", true},
		{"arn:aws-cn:dynamodb:cn-north-1:1:table/my.table", true},
		{"ab", false},
		{strings.Repeat("t", 256), false},
		{"big seg", false},
		{"big/seg", false},
		{"bigség", false},
		{"arn:table/bigseg", false},
		{"arn:aws dynamodb:table/bigseg", false},
		{"arn:aws:dynamodb:eu-west-1:1:table/ab", false},
		{"arn:aws:dynamodb:eu-west-1:1:table/", false},
		{"arn:aws:dynamodb:eu-west-1:1:bigseg", false},
		{"", false},
	} {
		if got := dynamodb.IsTableName(tc.name); got != tc.ok {
			t.Errorf("dynamodb.IsTableName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
