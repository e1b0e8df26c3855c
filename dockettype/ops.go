package dockettype

// OpKind says what an Op does.
type OpKind uint8

// Op kinds.
const (
	OpSet OpKind = iota + 1
	OpDelete
	OpIfVersion
	OpIfExists
	OpIfAbsent
	OpEnqueue
)
