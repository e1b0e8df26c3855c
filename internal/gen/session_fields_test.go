package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// sessionFields lists the fields of a session message's oneof as
// "Message.field = number type", one a line, in number order.
func sessionFields(md protoreflect.MessageDescriptor, oneof protoreflect.Name) []string {
	fs := md.Oneofs().ByName(oneof).Fields()
	var out []string
	for i := range fs.Len() {
		f := fs.Get(i)
		out = append(out, fmt.Sprintf("%s.%s = %d %s", md.Name(), f.Name(), f.Number(), f.Message().FullName()))
	}
	return out
}

// TestSessionFieldsGolden: every field Call and Reply ever had keeps its
// name, number and type (the oneofs are written from the rpcs' session
// options, and clients and servers of other versions read these numbers),
// and every Call field is answered by a Reply field of the same number and
// name. A field added to the schema is listed here by the test's log; add
// it to proto/docket/v1/testdata/session_fields.golden.
func TestSessionFieldsGolden(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join(root, "proto", "docket", "v1", "testdata", "session_fields.golden"))
	if err != nil {
		t.Fatal(err)
	}
	calls := sessionFields((&v1.Call{}).ProtoReflect().Descriptor(), "call")
	replies := sessionFields((&v1.Reply{}).ProtoReflect().Descriptor(), "reply")
	have := map[string]bool{}
	for _, l := range append(calls, replies...) {
		have[l] = true
	}
	want := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		want[l] = true
		if !have[l] {
			t.Errorf("session field %q is gone or changed", l)
		}
	}
	for _, l := range append(calls, replies...) {
		if !want[l] {
			t.Logf("new session field, not in the golden list: %s", l)
		}
	}
	rd := (&v1.Reply{}).ProtoReflect().Descriptor()
	cf := (&v1.Call{}).ProtoReflect().Descriptor().Oneofs().ByName("call").Fields()
	for i := range cf.Len() {
		f := cf.Get(i)
		if f.Name() == "abandon" {
			continue // ends another call's wait; no answer of its own
		}
		r := rd.Fields().ByNumber(f.Number())
		if r == nil || r.Name() != f.Name() || r.ContainingOneof() == nil {
			t.Errorf("Call.%s = %d has no Reply field of its number and name", f.Name(), f.Number())
		}
	}
}
