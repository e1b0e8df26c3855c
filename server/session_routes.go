package server

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// route is how a session serves one kind of Call: the unary call's own
// function, and where its request and response sit in Call and Reply.
type route struct {
	proc string // the unary call's procedure, for the logs
	// run runs the call's request and returns its response.
	run func(context.Context, proto.Message) (proto.Message, error)
	// in is the Call's field of the request, out the Reply's of the
	// response (the same number).
	in, out protoreflect.FieldDescriptor
}

var (
	callDesc     = (&v1.Call{}).ProtoReflect().Descriptor()
	replyDesc    = (&v1.Reply{}).ProtoReflect().Descriptor()
	callOneof    = callDesc.Oneofs().ByName("call")
	replyOneof   = replyDesc.Oneofs().ByName("reply")
	abandonField = callDesc.Fields().ByName("abandon")
	claimWaitFld = callDesc.Fields().ByName("claim_wait")
	enqueueField = callDesc.Fields().ByName("enqueue")
	replyError   = replyDesc.Fields().ByName("error")
)

// to is the route of a Call's field name to run, the function of the unary
// call procedure. It panics (at New) when the field, its Reply field or the
// types do not match, so that a schema change cannot be half served.
func to[Req, Res proto.Message](name protoreflect.Name, proc string, run func(context.Context, Req) (Res, error)) route {
	in := callDesc.Fields().ByName(name)
	if in == nil || in.ContainingOneof() != callOneof {
		panic(fmt.Sprintf("docket: session route %q: no such Call field", name))
	}
	out := replyDesc.Fields().ByNumber(in.Number())
	var req Req
	var res Res
	if out == nil || out.ContainingOneof() != replyOneof ||
		in.Message().FullName() != req.ProtoReflect().Descriptor().FullName() ||
		out.Message().FullName() != res.ProtoReflect().Descriptor().FullName() {
		panic(fmt.Sprintf("docket: session route %q: its Reply field or types do not match", name))
	}
	return route{proc: proc, in: in, out: out, run: func(ctx context.Context, m proto.Message) (proto.Message, error) {
		r, err := run(ctx, m.(Req))
		if err != nil {
			return nil, err
		}
		return r, nil
	}}
}

// routeMap indexes routes by their Call field number. It panics (at New)
// when two routes serve one field.
func routeMap(rs []route) map[protoreflect.FieldNumber]*route {
	m := make(map[protoreflect.FieldNumber]*route, len(rs))
	for i := range rs {
		r := &rs[i]
		if _, dup := m[r.in.Number()]; dup {
			panic(fmt.Sprintf("docket: session route %q twice", r.in.Name()))
		}
		m[r.in.Number()] = r
	}
	return m
}
