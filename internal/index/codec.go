package index

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Encoding of batches and snapshot records (part of the on-disk format).
//
// Everything is MessagePack. A batch is the sequence of values
//
//	version(=7, or 6 when no value in it is by reference) seq now seed [assertion...] [mutation...]
//
// where each assertion and mutation is an array starting with its kind. A task
// record is the array
//
//	[id project scope queue state attempts maxAttempts priority notBefore
//	 backoffBase backoffMax owner token leaseUntil created updated payload extra
//	 secret partition]
//
// where partition, the key of the task's partition of its queue, is there
// only when the task names one (never ""): a task that names none is the
// 19-field array without it.
// with extra nil or [kind idemKey lastError progress result headers errors
// parent followUps depPolicy], errors an array of [attempt at error] (oldest
// first) and followUps an array of task ids. A task update is [2 id state attempts
// notBefore owner token leaseUntil updated flags progress result lastError
// secret], followed by errAttempt errAt when flags has UpdAddError and by
// followUps when it has UpdFollowUps (14 to 17 fields); a task delete is [3
// id flags]. An idempotency mutation is [6 or 7 project scope queue key id
// expires states]; a settings mutation is [8 conf] to set a queue's
// settings and [9 project scope queue] to delete them, with conf the fields
// project scope queue paused maxInFlight rate per burst credit at, and
// partMaxInFlight after them when it is not 0 ([8 conf] of 12 fields), and
// partRate partPer partBurst after that when partRate is not 0 (15
// fields, partMaxInFlight then written even when 0); a dependency put or
// delete is [10 parent child] or [11 parent child]; a partition bucket put
// is [12 project scope queue key credit at] and its delete [13 project
// scope queue key]. A
// snapshot is a sequence of records, each one array whose first element is
// its record kind: RecHeader [1 seq nextID now], RecTask [2 task], RecKV [3
// project scope key value version], RecIdem [4 project scope queue key id
// expires states], RecTotals [5 project scope queue enqueued claimed
// completed retried deadLettered idle], RecConf [6 conf] (11, 12 or 15
// fields), RecDep [7 parent child], RecBucket [8 project scope queue key
// credit at].
//
// A value (a task's payload, progress and result, in a task record or an
// update, and a KV entry's value in a set or a record) is written in its
// place as bin, nil when empty, or, when it is kept in the value log, as
// its reference [file off len] (len > 0); a task whose only extra field is
// its payload's reference has extra nil. A value move is [14 kind id
// project scope key old new], with kind the ValueKind, old and new
// references, id 0 for a KV value and project scope key "" for a task's.
//
// The encoding is deterministic, so that the same state gives the same bytes
// on every node: headers are written in key order, an empty byte string is
// written as nil (and read back as nil), and the fields of every record have
// one fixed order.
//
// Older versions are still read. Version 6 is version 7 without value
// references and moves; a batch without them is written as version 6,
// byte for byte as before, so that a reader of version 6 still reads it.
// Snapshot records have no version: a state without references is
// written as version 6 wrote it. Version 5 is version 6 without
// partitions: every task record has 19 fields, every settings record
// 10 (no partMaxInFlight, no partition rate), and there are no partition
// bucket mutations. Version 4 is version 5 without
// dependencies: a task's extra has 9 fields (no depPolicy), no task is
// waiting (state 6), and there are no dependency mutations or records.
// Version 3: no settings mutations, and idempotency mutations and records
// without states (7 fields; States 0).
// Version 2: a task's extra has 6 fields (no
// errors, parent or followUps), a task update always 14, a task delete 2 ([3
// id]), and snapshots have no totals records. Version 1 is version 2 without
// a batch seed, with 18-field task records and 13-field updates (no secret),
// and a snapshot header without the time ([1 seq nextID]).
const (
	batchVersion  = 7
	batchVersion6 = 6
	batchVersion5 = 5
	batchVersion4 = 4
	batchVersion3 = 3
	batchVersion2 = 2
	batchVersion1 = 1

	// Snapshot record kinds.
	RecHeader = 1
	RecTask   = 2
	RecKV     = 3
	RecIdem   = 4
	RecTotals = 5
	RecConf   = 6
	RecDep    = 7
	RecBucket = 8
)

// Encoder turns batches and records into bytes. It reuses its buffer: the
// returned slice is valid until the next call.
type Encoder struct {
	buf  bytes.Buffer
	enc  *msgpack.Encoder
	keys []string // scratch for sorting headers
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseCompactInts(true)
	return e
}

// Batch encodes b.
func (e *Encoder) Batch(b *Batch) ([]byte, error) {
	e.buf.Reset()
	enc := e.enc
	var err error
	put := func(err2 error) {
		if err == nil {
			err = err2
		}
	}
	// A batch without a value reference is written as version 6, the
	// bytes it had before references: only a batch with one needs a
	// reader that knows them.
	put(enc.EncodeUint(batchVersion6))
	refs := false
	put(enc.EncodeUint(b.Seq))
	put(enc.EncodeInt(b.Now))
	put(enc.EncodeUint(b.Seed))
	put(enc.EncodeArrayLen(len(b.Assertions)))
	for i := range b.Assertions {
		a := &b.Assertions[i]
		switch a.Kind {
		case AssertToken:
			put(enc.EncodeArrayLen(3))
			put(enc.EncodeUint(uint64(a.Kind)))
			put(enc.EncodeUint(a.ID))
			put(enc.EncodeUint(a.Token))
		default:
			put(enc.EncodeArrayLen(5))
			put(enc.EncodeUint(uint64(a.Kind)))
			put(enc.EncodeString(a.NS.Project))
			put(enc.EncodeString(a.NS.Scope))
			put(enc.EncodeString(a.Key))
			put(enc.EncodeUint(a.Version))
		}
	}
	put(enc.EncodeArrayLen(len(b.Mutations)))
	for i := range b.Mutations {
		m := &b.Mutations[i]
		if err == nil {
			// A value both in line and by reference has no encoding.
			err = checkValues(m)
		}
		refs = refs || m.hasRef()
		switch m.Kind {
		case MutPutTask:
			e.task(uint64(m.Kind), m.Task)
		case MutUpdateTask:
			u := &m.Update
			put(enc.EncodeArrayLen(updateFields(u.Flags)))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(enc.EncodeUint(u.ID))
			put(enc.EncodeUint(uint64(u.State)))
			put(enc.EncodeUint(uint64(u.Attempts)))
			put(enc.EncodeInt(u.NotBefore))
			put(enc.EncodeString(u.Owner))
			put(enc.EncodeUint(u.Token))
			put(enc.EncodeInt(u.LeaseUntil))
			put(enc.EncodeInt(u.Updated))
			put(enc.EncodeUint(uint64(u.Flags)))
			put(e.value(u.Flags&UpdProgress != 0, u.Progress, u.ProgressRef))
			put(e.value(u.Flags&UpdResult != 0, u.Result, u.ResultRef))
			put(enc.EncodeString(u.LastError))
			put(enc.EncodeUint(u.Secret))
			if u.Flags&UpdAddError != 0 {
				put(enc.EncodeUint(uint64(u.ErrAttempt)))
				put(enc.EncodeInt(u.ErrAt))
			}
			if u.Flags&UpdFollowUps != 0 {
				put(e.ids(u.FollowUps))
			}
		case MutDeleteTask:
			put(enc.EncodeArrayLen(3))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(enc.EncodeUint(m.Update.ID))
			put(enc.EncodeUint(uint64(m.Update.Flags & UpdCompleted)))
		case MutSetKV, MutDeleteKV:
			put(enc.EncodeArrayLen(5))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(enc.EncodeString(m.KV.Project))
			put(enc.EncodeString(m.KV.Scope))
			put(enc.EncodeString(m.KV.Key))
			if m.Kind == MutSetKV {
				put(e.value(true, m.KV.Value, m.KV.ValueRef()))
			} else {
				put(encodeBytes(enc, true, m.KV.Value))
			}
		case MutPutIdem, MutDeleteIdem:
			put(enc.EncodeArrayLen(8))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(e.idemFields(m.Idem))
		case MutPutConf:
			put(enc.EncodeArrayLen(confFields(m.Conf) + 1))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(e.confFields(m.Conf))
		case MutPutBucket:
			put(enc.EncodeArrayLen(7))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(e.bucketFields(m.Bucket, true))
		case MutDeleteBucket:
			put(enc.EncodeArrayLen(5))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(e.bucketFields(m.Bucket, false))
		case MutDeleteConf:
			put(enc.EncodeArrayLen(4))
			put(enc.EncodeUint(uint64(m.Kind)))
			k := m.Conf.Queue
			put(firstErr(enc.EncodeString(k.Project), enc.EncodeString(k.Scope), enc.EncodeString(k.Name)))
		case MutPutDep, MutDeleteDep:
			put(enc.EncodeArrayLen(3))
			put(enc.EncodeUint(uint64(m.Kind)))
			put(enc.EncodeUint(m.Dep.Parent))
			put(enc.EncodeUint(m.Dep.Child))
		case MutMoveValue:
			v := &m.Move
			put(firstErr(enc.EncodeArrayLen(8), enc.EncodeUint(uint64(m.Kind)), enc.EncodeUint(uint64(v.Kind)),
				enc.EncodeUint(v.ID), enc.EncodeString(v.NS.Project), enc.EncodeString(v.NS.Scope), enc.EncodeString(v.Key),
				e.value(true, nil, v.Old), e.value(true, nil, v.New)))
		default:
			put(fmt.Errorf("%w: unknown mutation kind %d", ErrCorrupt, m.Kind))
		}
	}
	out := e.buf.Bytes()
	if refs && len(out) > 0 {
		out[0] = batchVersion // a positive fixint, as 6 was
	}
	return out, err
}

// hasRef reports whether m carries a value reference, which needs
// version 7 to be read.
func (m *Mutation) hasRef() bool {
	switch m.Kind {
	case MutPutTask:
		return m.Task != nil && m.Task.hasRefs()
	case MutUpdateTask:
		return !m.Update.ProgressRef.IsZero() || !m.Update.ResultRef.IsZero()
	case MutSetKV:
		return m.KV.Ref != nil
	case MutMoveValue:
		return true
	}
	return false
}

// value writes a value slot: the reference [file off len] when r is set
// and the value present, else the bytes as encodeBytes does.
func (e *Encoder) value(present bool, b []byte, r ValueRef) error {
	if !present || r.IsZero() {
		return encodeBytes(e.enc, present, b)
	}
	return firstErr(e.enc.EncodeArrayLen(3), e.enc.EncodeUint(uint64(r.File)), e.enc.EncodeUint(uint64(r.Off)),
		e.enc.EncodeUint(uint64(r.Len)))
}

// updateFields is the array length of a task update with flags.
func updateFields(flags uint8) int {
	n := 14
	if flags&UpdAddError != 0 {
		n += 2
	}
	if flags&UpdFollowUps != 0 {
		n++
	}
	return n
}

// ids writes a list of task ids.
func (e *Encoder) ids(ids []uint64) error {
	err := e.enc.EncodeArrayLen(len(ids))
	for _, id := range ids {
		if err == nil {
			err = e.enc.EncodeUint(id)
		}
	}
	return err
}

// encodeBytes writes b, or nil when it is empty or not present: nil and an
// empty slice are one value, so they must be one encoding.
func encodeBytes(enc *msgpack.Encoder, present bool, b []byte) error {
	if !present || len(b) == 0 {
		return enc.EncodeNil()
	}
	return enc.EncodeBytes(b)
}

func (e *Encoder) idemFields(d Idem) error {
	enc := e.enc
	for _, s := range [...]string{d.Queue.Project, d.Queue.Scope, d.Queue.Name, d.Key} {
		if err := enc.EncodeString(s); err != nil {
			return err
		}
	}
	if err := enc.EncodeUint(d.ID); err != nil {
		return err
	}
	if err := enc.EncodeInt(d.Expires); err != nil {
		return err
	}
	return enc.EncodeUint(uint64(d.States))
}

// confFields is how many fields the encoding of c has.
func confFields(c QueueConf) int {
	switch {
	case c.PartRate != 0:
		return 14
	case c.PartMaxInFlight != 0:
		return 11
	}
	return 10
}

// bucketFields encodes a partition bucket: its queue and key, and its
// level when level is set.
func (e *Encoder) bucketFields(b PartBucket, level bool) error {
	enc := e.enc
	err := firstErr(enc.EncodeString(b.Queue.Project), enc.EncodeString(b.Queue.Scope), enc.EncodeString(b.Queue.Name),
		enc.EncodeString(b.Key))
	if err == nil && level {
		err = firstErr(enc.EncodeInt(b.Credit), enc.EncodeInt(b.At))
	}
	return err
}

func (e *Encoder) confFields(c QueueConf) error {
	enc := e.enc
	err := firstErr(enc.EncodeString(c.Queue.Project), enc.EncodeString(c.Queue.Scope), enc.EncodeString(c.Queue.Name),
		enc.EncodeBool(c.Paused), enc.EncodeInt(c.MaxInFlight), enc.EncodeInt(c.Rate), enc.EncodeInt(c.Per),
		enc.EncodeInt(c.Burst), enc.EncodeInt(c.Credit), enc.EncodeInt(c.At))
	if err == nil && (c.PartMaxInFlight != 0 || c.PartRate != 0) {
		err = enc.EncodeInt(c.PartMaxInFlight)
	}
	if err == nil && c.PartRate != 0 {
		err = firstErr(enc.EncodeInt(c.PartRate), enc.EncodeInt(c.PartPer), enc.EncodeInt(c.PartBurst))
	}
	return err
}

// Header encodes the snapshot header record: seq, next id and time, in
// that order.
func (e *Encoder) Header(seq, nextID uint64, now int64) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(4), e.enc.EncodeUint(RecHeader), e.enc.EncodeUint(seq),
		e.enc.EncodeUint(nextID), e.enc.EncodeInt(now))
	return e.buf.Bytes(), err
}

// TaskRecord encodes a snapshot task record.
func (e *Encoder) TaskRecord(t *Task) ([]byte, error) {
	e.buf.Reset()
	e.task(RecTask, t)
	return e.buf.Bytes(), nil
}

// KVRecord encodes a snapshot KV record.
func (e *Encoder) KVRecord(kv KV) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(6), e.enc.EncodeUint(RecKV), e.enc.EncodeString(kv.Project),
		e.enc.EncodeString(kv.Scope), e.enc.EncodeString(kv.Key), e.value(true, kv.Value, kv.ValueRef()), e.enc.EncodeUint(kv.Version))
	return e.buf.Bytes(), err
}

// IdemRecord encodes a snapshot idempotency record.
func (e *Encoder) IdemRecord(d Idem) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(8), e.enc.EncodeUint(RecIdem), e.idemFields(d))
	return e.buf.Bytes(), err
}

// ConfRecord encodes a snapshot record of a queue's settings.
func (e *Encoder) ConfRecord(c QueueConf) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(confFields(c)+1), e.enc.EncodeUint(RecConf), e.confFields(c))
	return e.buf.Bytes(), err
}

// BucketRecord encodes a snapshot record of a partition's token bucket.
func (e *Encoder) BucketRecord(b PartBucket) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(7), e.enc.EncodeUint(RecBucket), e.bucketFields(b, true))
	return e.buf.Bytes(), err
}

// DepRecord encodes a snapshot dependency record.
func (e *Encoder) DepRecord(d Dep) ([]byte, error) {
	e.buf.Reset()
	err := firstErr(e.enc.EncodeArrayLen(3), e.enc.EncodeUint(RecDep), e.enc.EncodeUint(d.Parent),
		e.enc.EncodeUint(d.Child))
	return e.buf.Bytes(), err
}

// TotalsRecord encodes a snapshot record of a queue's totals.
func (e *Encoder) TotalsRecord(r QueueTotals) ([]byte, error) {
	e.buf.Reset()
	enc := e.enc
	err := firstErr(enc.EncodeArrayLen(10), enc.EncodeUint(RecTotals), enc.EncodeString(r.Queue.Project),
		enc.EncodeString(r.Queue.Scope), enc.EncodeString(r.Queue.Name), enc.EncodeUint(r.Enqueued),
		enc.EncodeUint(r.Claimed), enc.EncodeUint(r.Completed), enc.EncodeUint(r.Retried),
		enc.EncodeUint(r.DeadLettered), enc.EncodeInt(r.Idle))
	return e.buf.Bytes(), err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Decoder turns bytes back into batches and records. Decoding changes no
// Store: a decoded task points at the Store's queue when it exists and
// otherwise at a detached queue carrying its key (see Store.QueueRef), which
// Apply or a restore replaces.
type Decoder struct {
	r    bytes.Reader
	dec  *msgpack.Decoder
	s    *Store
	n    int    // size of the current input, bounds every length read
	data []byte // the current input
	// ver is the version of the current batch; 0 while decoding a snapshot
	// record, whose fields say which version wrote it.
	ver uint64
	// last is the queue key of the last task record fastTask read.
	last fastKey
	// retry is the last retry policy a task record set.
	retry sharedCache
	// parts are the partitions the task records named, without a store:
	// as many as there are keys, for as long as the Decoder lives (a
	// restore's).
	parts partRefs
	// slabs hold the records and payloads fastTask decodes.
	slabs slabs
}

// NewDecoder returns a Decoder whose tasks point at the queues of s. With s
// nil they point at detached queues that carry only their key (as
// Store.QueueRef makes them), and the Decoder reads no store: it may then
// run on another goroutine than the one loading its records, which points
// them at the store's queues (Store.LoadTask).
func NewDecoder(s *Store) *Decoder {
	d := &Decoder{s: s}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}

// partRef is Store.PartRef of the Decoder's store, or one of its own.
func (d *Decoder) partRef(k QueueKey, key string) *Partition {
	if d.s != nil {
		return d.s.PartRef(k, key)
	}
	return d.parts.ref(key, 0)
}

// partRefBytes is partRef(k, string(key)); without a store it allocates
// the key only for a partition it has not seen.
func (d *Decoder) partRefBytes(k QueueKey, key []byte) *Partition {
	if d.s != nil {
		return d.s.PartRef(k, string(key))
	}
	return d.parts.refBytes(key, 0)
}

// queueRef is Store.QueueRef of the Decoder's store, or a detached queue.
func (d *Decoder) queueRef(k QueueKey) *Queue {
	if d.s == nil {
		return &Queue{Key: k}
	}
	return d.s.QueueRef(k)
}

func (d *Decoder) reset(data []byte) {
	d.r.Reset(data)
	d.dec.Reset(&d.r)
	d.n = len(data)
	d.data = data
}

// fits checks that the str or bin value at the read position declares no
// more bytes than the input has left, so that a corrupt length cannot make
// the decoder allocate it.
func (d *Decoder) fits() error {
	return FitsAt(d.data, len(d.data)-d.r.Len())
}

// FitsAt checks that the MessagePack str or bin value at offset pos of
// data declares no more bytes than data has left after it, so that a
// corrupt length cannot make a decoder allocate it. Any other value, or
// none (pos at the end), passes: the decoder reports those itself.
func FitsAt(data []byte, pos int) error {
	if pos >= len(data) {
		return nil
	}
	rest := data[pos:]
	var n, hdr int
	switch c := rest[0]; {
	case c == 0xc4 || c == 0xd9: // bin8, str8
		hdr = 2
		if len(rest) >= 2 {
			n = int(rest[1])
		}
	case c == 0xc5 || c == 0xda: // bin16, str16
		hdr = 3
		if len(rest) >= 3 {
			n = int(rest[1])<<8 | int(rest[2])
		}
	case c == 0xc6 || c == 0xdb: // bin32, str32
		hdr = 5
		if len(rest) >= 5 {
			n = int(uint32(rest[1])<<24 | uint32(rest[2])<<16 | uint32(rest[3])<<8 | uint32(rest[4]))
		}
	default:
		return nil
	}
	if len(rest) < hdr || n > len(rest)-hdr {
		return fmt.Errorf("value of %d bytes at offset %d runs past the end (%d bytes left)", n, pos, len(rest))
	}
	return nil
}

// bytes decodes a bin (or nil) value; empty is nil.
func (d *Decoder) bytes() ([]byte, error) {
	if err := d.fits(); err != nil {
		return nil, err
	}
	b, err := d.dec.DecodeBytes()
	return nonEmpty(b), err
}

// value decodes a value slot: a bin (or nil) value, or, from version 7
// on (and in snapshot records), a reference [file off len].
func (d *Decoder) value() ([]byte, ValueRef, error) {
	if pos := len(d.data) - d.r.Len(); pos < len(d.data) && d.data[pos] == 0x93 && (d.ver == 0 || d.ver >= batchVersion) {
		r, err := d.ref()
		return nil, r, err
	}
	b, err := d.bytes()
	return b, ValueRef{}, err
}

// ref decodes a value reference [file off len].
func (d *Decoder) ref() (ValueRef, error) {
	if _, err := d.arrayLen("value reference", 3, 3); err != nil {
		return ValueRef{}, err
	}
	var f, off, n uint64
	var err error
	if f, err = d.dec.DecodeUint64(); err == nil {
		if off, err = d.dec.DecodeUint64(); err == nil {
			n, err = d.dec.DecodeUint64()
		}
	}
	if err != nil {
		return ValueRef{}, corrupt("value reference", err)
	}
	r, err := decodeRef(f, off, n)
	if err != nil {
		return r, corrupt("value", err)
	}
	return r, nil
}

// str decodes a str value.
func (d *Decoder) str() (string, error) {
	if err := d.fits(); err != nil {
		return "", err
	}
	return d.dec.DecodeString()
}

func corrupt(what string, err error) error {
	if err == nil {
		return fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
}

func (d *Decoder) arrayLen(what string, min, max int) (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, corrupt(what, err)
	}
	if n < min || n > max || n > d.n {
		return 0, corrupt(fmt.Sprintf("%s: array of %d", what, n), nil)
	}
	return n, nil
}

// mutFields is the array length of each mutation kind in version 2 (a
// version 1 task update has 13; the changes of later versions are checked
// in mutation).
var mutFields = [...]int{MutPutTask: 2, MutUpdateTask: 14, MutDeleteTask: 2, MutSetKV: 5,
	MutDeleteKV: 5, MutPutIdem: 7, MutDeleteIdem: 7}

// Batch decodes data into b, replacing its contents.
func (d *Decoder) Batch(data []byte, b *Batch) error {
	d.reset(data)
	b.Reset()
	dec := d.dec
	v, err := dec.DecodeUint64()
	if err != nil {
		return corrupt("batch version", err)
	}
	if v < batchVersion1 || v > batchVersion {
		return corrupt(fmt.Sprintf("batch version %d", v), nil)
	}
	d.ver = v
	if b.Seq, err = dec.DecodeUint64(); err != nil {
		return corrupt("batch seq", err)
	}
	if b.Now, err = dec.DecodeInt64(); err != nil {
		return corrupt("batch time", err)
	}
	if d.ver > batchVersion1 {
		if b.Seed, err = dec.DecodeUint64(); err != nil {
			return corrupt("batch seed", err)
		}
	}
	na, err := d.arrayLen("assertions", 0, 1<<30)
	if err != nil {
		return err
	}
	for i := 0; i < na; i++ {
		var a Assertion
		n, err := d.arrayLen("assertion", 3, 5)
		if err != nil {
			return err
		}
		k, err := dec.DecodeUint8()
		if err != nil {
			return corrupt("assertion kind", err)
		}
		a.Kind = AssertKind(k)
		switch {
		case a.Kind == AssertToken && n == 3:
			a.ID, err = dec.DecodeUint64()
			if err == nil {
				a.Token, err = dec.DecodeUint64()
			}
		case a.Kind >= AssertKVVersion && a.Kind <= AssertKVAbsent && n == 5:
			a.NS.Project, a.NS.Scope, a.Key, err = d.strings3()
			if err == nil {
				a.Version, err = dec.DecodeUint64()
			}
		default:
			return corrupt(fmt.Sprintf("assertion kind %d with %d fields", k, n), nil)
		}
		if err != nil {
			return corrupt("assertion", err)
		}
		b.Assertions = append(b.Assertions, a)
	}
	nm, err := d.arrayLen("mutations", 0, 1<<30)
	if err != nil {
		return err
	}
	for i := 0; i < nm; i++ {
		var m Mutation
		if err := d.mutation(&m); err != nil {
			return err
		}
		b.Mutations = append(b.Mutations, m)
	}
	if d.r.Len() != 0 {
		return corrupt(fmt.Sprintf("%d bytes after batch", d.r.Len()), nil)
	}
	return nil
}

func (d *Decoder) strings3() (a, b, c string, err error) {
	if a, err = d.str(); err != nil {
		return
	}
	if b, err = d.str(); err != nil {
		return
	}
	c, err = d.str()
	return
}

func (d *Decoder) mutation(m *Mutation) error {
	dec := d.dec
	n, err := d.arrayLen("mutation", 2, 17)
	if err != nil {
		return err
	}
	k, err := dec.DecodeUint8()
	if err != nil {
		return corrupt("mutation kind", err)
	}
	m.Kind = MutKind(k)
	want := 0
	if int(k) < len(mutFields) {
		want = mutFields[k]
		switch {
		case d.ver == batchVersion1 && m.Kind == MutUpdateTask:
			want = 13
		case d.ver >= batchVersion3 && m.Kind == MutUpdateTask && n >= 14 && n <= 17:
			want = n // checked against the flags below
		case d.ver >= batchVersion3 && m.Kind == MutDeleteTask:
			want = 3
		case d.ver >= batchVersion4 && (m.Kind == MutPutIdem || m.Kind == MutDeleteIdem):
			want = 8
		}
	} else if d.ver >= batchVersion4 {
		switch {
		case m.Kind == MutPutConf && (n == 11 || (n == 12 || n == 15) && d.ver >= batchVersion6):
			want = n
		case d.ver >= batchVersion6 && m.Kind == MutPutBucket:
			want = 7
		case d.ver >= batchVersion6 && m.Kind == MutDeleteBucket:
			want = 5
		case d.ver >= batchVersion && m.Kind == MutMoveValue:
			want = 8
		case m.Kind == MutDeleteConf:
			want = 4
		case d.ver >= batchVersion5 && (m.Kind == MutPutDep || m.Kind == MutDeleteDep):
			want = 3
		}
	}
	if want == 0 || want != n {
		return corrupt(fmt.Sprintf("mutation kind %d with %d fields", k, n), nil)
	}
	switch m.Kind {
	case MutPutTask:
		m.Task, err = d.task()
		return err
	case MutUpdateTask:
		u := &m.Update
		var st, att, flags uint64
		if u.ID, err = dec.DecodeUint64(); err == nil {
			if st, err = dec.DecodeUint64(); err == nil {
				if att, err = dec.DecodeUint64(); err == nil {
					if u.NotBefore, err = dec.DecodeInt64(); err == nil {
						if u.Owner, err = d.str(); err == nil {
							if u.Token, err = dec.DecodeUint64(); err == nil {
								if u.LeaseUntil, err = dec.DecodeInt64(); err == nil {
									if u.Updated, err = dec.DecodeInt64(); err == nil {
										flags, err = dec.DecodeUint64()
									}
								}
							}
						}
					}
				}
			}
		}
		if err != nil {
			return corrupt("task update", err)
		}
		if st >= NumStates || att > 1<<32-1 || flags > 0xff || d.ver < batchVersion6 && TaskState(st) == StateWaiting {
			return corrupt("task update fields", nil)
		}
		u.State, u.Attempts, u.Flags = TaskState(st), uint32(att), uint8(flags)
		switch {
		case d.ver < batchVersion3 && flags >= UpdAddError:
			return corrupt(fmt.Sprintf("version %d task update flags %#x", d.ver, flags), nil)
		case d.ver >= batchVersion3 && (flags&UpdCompleted != 0 || n != updateFields(u.Flags)):
			return corrupt(fmt.Sprintf("task update with flags %#x and %d fields", flags, n), nil)
		}
		if u.Progress, u.ProgressRef, err = d.value(); err != nil {
			return corrupt("task update progress", err)
		}
		if u.Result, u.ResultRef, err = d.value(); err != nil {
			return corrupt("task update result", err)
		}
		if u.Flags&UpdProgress == 0 && !u.ProgressRef.IsZero() || u.Flags&UpdResult == 0 && !u.ResultRef.IsZero() {
			return corrupt("task update: a reference to a value it does not replace", nil)
		}
		if u.LastError, err = d.str(); err != nil {
			return corrupt("task update error", err)
		}
		if d.ver > batchVersion1 {
			if u.Secret, err = dec.DecodeUint64(); err != nil {
				return corrupt("task update secret", err)
			}
		}
		if u.Flags&UpdAddError != 0 {
			var att uint64
			if att, err = dec.DecodeUint64(); err == nil {
				u.ErrAt, err = dec.DecodeInt64()
			}
			if err != nil || att > 1<<32-1 {
				return corrupt("task update attempt error", err)
			}
			u.ErrAttempt = uint32(att)
		}
		if u.Flags&UpdFollowUps != 0 {
			if u.FollowUps, err = d.ids("task update follow-ups"); err != nil {
				return err
			}
		}
		return nil
	case MutDeleteTask:
		if m.Update.ID, err = dec.DecodeUint64(); err != nil {
			return corrupt("task delete", err)
		}
		if n == 3 {
			var flags uint64
			if flags, err = dec.DecodeUint64(); err != nil || flags&^UpdCompleted != 0 {
				return corrupt("task delete flags", err)
			}
			m.Update.Flags = uint8(flags)
		}
		return nil
	case MutSetKV, MutDeleteKV:
		var r ValueRef
		if m.KV.Project, m.KV.Scope, m.KV.Key, err = d.strings3(); err == nil {
			m.KV.Value, r, err = d.value()
		}
		if err == nil && !r.IsZero() {
			if m.Kind == MutDeleteKV {
				err = fmt.Errorf("a value reference in a delete")
			}
			m.KV.Ref = &r
		}
		if err != nil {
			return corrupt("kv mutation", err)
		}
		return nil
	case MutPutIdem, MutDeleteIdem:
		m.Idem, err = d.idemFields(n == 8)
		return err
	case MutPutConf:
		m.Conf, err = d.confFields(n - 1)
		return err
	case MutPutBucket, MutDeleteBucket:
		m.Bucket, err = d.bucket(m.Kind == MutPutBucket)
		return err
	case MutDeleteConf:
		k := &m.Conf.Queue
		if k.Project, k.Scope, k.Name, err = d.strings3(); err != nil {
			return corrupt("settings delete", err)
		}
		return nil
	case MutPutDep, MutDeleteDep:
		m.Dep, err = d.dep()
		return err
	case MutMoveValue:
		v := &m.Move
		var vk uint64
		if vk, err = dec.DecodeUint64(); err == nil {
			if v.ID, err = dec.DecodeUint64(); err == nil {
				if v.NS.Project, v.NS.Scope, v.Key, err = d.strings3(); err == nil {
					if v.Old, err = d.ref(); err == nil {
						v.New, err = d.ref()
					}
				}
			}
		}
		if err == nil && (vk > 0xff || !ValueKind(vk).valid()) {
			err = fmt.Errorf("value kind %d", vk)
		}
		if err != nil {
			return corrupt("value move", err)
		}
		v.Kind = ValueKind(vk)
		return nil
	}
	return corrupt(fmt.Sprintf("mutation kind %d", k), nil)
}

// idemFields decodes an idempotency entry, with its states when it has
// them (version 4 on).
func (d *Decoder) idemFields(states bool) (Idem, error) {
	var e Idem
	var err error
	if e.Queue.Project, e.Queue.Scope, e.Queue.Name, err = d.strings3(); err == nil {
		if e.Key, err = d.str(); err == nil {
			if e.ID, err = d.dec.DecodeUint64(); err == nil {
				e.Expires, err = d.dec.DecodeInt64()
			}
		}
	}
	if err == nil && states {
		var st uint64
		if st, err = d.dec.DecodeUint64(); err == nil && st > 0xff {
			err = fmt.Errorf("states %#x", st)
		}
		e.States = uint8(st)
	}
	if err != nil {
		return e, corrupt("idempotency entry", err)
	}
	return e, nil
}

// bucket decodes a partition bucket, with its level when level is set.
func (d *Decoder) bucket(level bool) (PartBucket, error) {
	var b PartBucket
	var err error
	if b.Queue.Project, b.Queue.Scope, b.Queue.Name, err = d.strings3(); err == nil {
		b.Key, err = d.str()
	}
	if err == nil && level {
		if b.Credit, err = d.dec.DecodeInt64(); err == nil {
			b.At, err = d.dec.DecodeInt64()
		}
	}
	if err != nil {
		return b, corrupt("partition bucket", err)
	}
	return b, nil
}

// confFields decodes a queue's settings record of nf fields (10, 11 with
// a partition bound, 14 with a partition rate).
func (d *Decoder) confFields(nf int) (QueueConf, error) {
	part := nf >= 11
	var c QueueConf
	var err error
	if c.Queue.Project, c.Queue.Scope, c.Queue.Name, err = d.strings3(); err == nil {
		c.Paused, err = d.dec.DecodeBool()
	}
	for _, p := range [...]*int64{&c.MaxInFlight, &c.Rate, &c.Per, &c.Burst, &c.Credit, &c.At} {
		if err == nil {
			*p, err = d.dec.DecodeInt64()
		}
	}
	if err == nil && part {
		if c.PartMaxInFlight, err = d.dec.DecodeInt64(); err == nil && c.PartMaxInFlight == 0 && nf == 11 {
			err = fmt.Errorf("a partition bound of 0 written")
		}
	}
	if err == nil && nf == 14 {
		for _, p := range [...]*int64{&c.PartRate, &c.PartPer, &c.PartBurst} {
			if err == nil {
				*p, err = d.dec.DecodeInt64()
			}
		}
		if err == nil && c.PartRate == 0 {
			err = fmt.Errorf("a partition rate of 0 written")
		}
	}
	if err != nil {
		return c, corrupt("queue settings", err)
	}
	return c, nil
}

// dep decodes the parent and child of a dependency.
func (d *Decoder) dep() (Dep, error) {
	var dep Dep
	var err error
	if dep.Parent, err = d.dec.DecodeUint64(); err == nil {
		dep.Child, err = d.dec.DecodeUint64()
	}
	if err != nil {
		return dep, corrupt("dependency", err)
	}
	if dep.Parent == 0 || dep.Child == 0 || dep.Parent == dep.Child {
		return dep, corrupt(fmt.Sprintf("dependency of %d on %d", dep.Child, dep.Parent), nil)
	}
	return dep, nil
}

// ids decodes a list of task ids.
func (d *Decoder) ids(what string) ([]uint64, error) {
	n, err := d.arrayLen(what, 0, 1<<30)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		if out[i], err = d.dec.DecodeUint64(); err != nil {
			return nil, corrupt(what, err)
		}
	}
	return out, nil
}

func (d *Decoder) task() (*Task, error) {
	dec := d.dec
	nf, err := d.arrayLen("task", 18, 20)
	if err != nil {
		return nil, err
	}
	if d.ver != 0 && ((nf == 18) != (d.ver == batchVersion1) || nf == 20 && d.ver < batchVersion6) {
		return nil, corrupt(fmt.Sprintf("version %d task of %d fields", d.ver, nf), nil)
	}
	t := &Task{}
	var k QueueKey
	var st, att, maxAtt uint64
	var r Retry
	var run Run
	var pay []byte
	var payRef ValueRef
	if t.ID, err = dec.DecodeUint64(); err == nil {
		if k.Project, k.Scope, k.Name, err = d.strings3(); err == nil {
			if st, err = dec.DecodeUint64(); err == nil {
				if att, err = dec.DecodeUint64(); err == nil {
					maxAtt, err = dec.DecodeUint64()
				}
			}
		}
	}
	for _, p := range [...]*int64{&t.Priority, &t.NotBefore, &r.BackoffBase, &r.BackoffMax} {
		if err == nil {
			*p, err = dec.DecodeInt64()
		}
	}
	if err == nil {
		if run.Owner, err = d.str(); err == nil {
			if run.Token, err = dec.DecodeUint64(); err == nil {
				if run.LeaseUntil, err = dec.DecodeInt64(); err == nil {
					if t.Created, err = dec.DecodeInt64(); err == nil {
						if run.Updated, err = dec.DecodeInt64(); err == nil {
							pay, payRef, err = d.value()
						}
					}
				}
			}
		}
	}
	if err != nil {
		return nil, corrupt("task record", err)
	}
	if !TaskState(st).Valid() || att > 1<<32-1 || maxAtt > 1<<32-1 || t.ID == 0 || t.ID == maxID ||
		d.ver != 0 && d.ver < batchVersion5 && TaskState(st) == StateWaiting {
		return nil, corrupt(fmt.Sprintf("task %d fields", t.ID), nil)
	}
	t.State, t.Attempts, r.MaxAttempts = TaskState(st), uint32(att), uint32(maxAtt)
	d.retry.set(t, r)
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, corrupt("task extra", err)
	}
	if n != -1 {
		if wantExtra := [...]int{batchVersion1: 6, batchVersion2: 6, batchVersion3: 9, batchVersion4: 9, batchVersion5: 10, batchVersion6: 10, batchVersion: 10}; n != 6 && n != 9 && n != 10 ||
			d.ver != 0 && n != wantExtra[d.ver] {
			return nil, corrupt(fmt.Sprintf("task extra of %d", n), nil)
		}
		x := &Extra{}
		var refs TaskRefs
		if x.Kind, x.IdemKey, x.LastError, err = d.strings3(); err == nil {
			if x.Progress, refs.Progress, err = d.value(); err == nil {
				x.Result, refs.Result, err = d.value()
			}
		}
		if refs != (TaskRefs{}) {
			x.Refs = &refs
		}
		if err != nil {
			return nil, corrupt("task extra", err)
		}
		nh, err := dec.DecodeMapLen()
		if err != nil || nh > d.n {
			return nil, corrupt("task headers", err)
		}
		if nh > 0 {
			x.Headers = make(map[string]string, nh)
			for i := 0; i < nh; i++ {
				hk, err := d.str()
				if err != nil {
					return nil, corrupt("task header", err)
				}
				hv, err := d.str()
				if err != nil {
					return nil, corrupt("task header", err)
				}
				x.Headers[hk] = hv
			}
		}
		if n >= 9 {
			if err := d.history(x); err != nil {
				return nil, err
			}
		}
		if n == 10 {
			var pol uint64
			if pol, err = dec.DecodeUint64(); err != nil || pol > 0xff {
				return nil, corrupt("task dependency policy", err)
			}
			x.DepPolicy = uint8(pol)
		}
		if !x.empty() {
			t.Extra = x
		}
	}
	t.pay = inLine(pay)
	if !payRef.IsZero() {
		t.pay = byRef(payRef)
	}
	if nf >= 19 {
		if run.Secret, err = dec.DecodeUint64(); err != nil {
			return nil, corrupt("task secret", err)
		}
	}
	t.SetRun(run.Owner, run.Token, run.LeaseUntil, run.Secret, run.Updated)
	if nf == 20 {
		key, err := d.str()
		if err == nil && key == "" {
			err = fmt.Errorf("an empty partition written")
		}
		if err != nil {
			return nil, corrupt("task partition", err)
		}
		t.sh = d.retry.handle(shared{t.Retry(), d.partRef(k, key)})
	}
	t.Queue = d.queueRef(k)
	return t, nil
}

// history decodes the attempt history, parent and follow-ups of a task's
// extra.
func (d *Decoder) history(x *Extra) error {
	ne, err := d.arrayLen("task errors", 0, MaxAttemptErrors)
	if err != nil {
		return err
	}
	if ne > 0 {
		x.Errors = make([]AttemptError, ne)
	}
	for i := range x.Errors {
		if _, err := d.arrayLen("task error", 3, 3); err != nil {
			return err
		}
		ae := &x.Errors[i]
		var att uint64
		if att, err = d.dec.DecodeUint64(); err == nil {
			if ae.At, err = d.dec.DecodeInt64(); err == nil {
				ae.Error, err = d.str()
			}
		}
		if err != nil || att > 1<<32-1 {
			return corrupt("task error", err)
		}
		ae.Attempt = uint32(att)
	}
	if x.Parent, err = d.dec.DecodeUint64(); err != nil {
		return corrupt("task parent", err)
	}
	x.FollowUps, err = d.ids("task follow-ups")
	return err
}

// Record is one decoded snapshot record; Kind says which field is set.
type Record struct {
	Kind   int
	Seq    uint64 // RecHeader
	NextID uint64 // RecHeader
	Now    int64  // RecHeader (0 in a version 1 header)
	Task   *Task
	KV     KV
	Idem   Idem
	Totals QueueTotals
	Conf   QueueConf
	Dep    Dep
	Bucket PartBucket // RecBucket
}

// Task decodes data when it is a task record of the common shape (no
// extra fields), which is most of a large snapshot, without building a
// Record; ok is false for anything else, which Record decodes (or refuses).
func (d *Decoder) Task(data []byte) (t *Task, ok bool) { return d.fastTask(data) }

// Record decodes one snapshot record.
func (d *Decoder) Record(data []byte) (Record, error) {
	if t, ok := d.fastTask(data); ok {
		return Record{Kind: RecTask, Task: t}, nil
	}
	return d.record(data)
}

// record is Record through the general decoder.
func (d *Decoder) record(data []byte) (Record, error) {
	d.reset(data)
	d.ver = 0
	var r Record
	n, err := d.arrayLen("record", 2, 15)
	if err != nil {
		return r, err
	}
	kind, err := d.dec.DecodeUint8()
	if err != nil {
		return r, corrupt("record kind", err)
	}
	r.Kind = int(kind)
	switch {
	case r.Kind == RecHeader && (n == 3 || n == 4):
		if r.Seq, err = d.dec.DecodeUint64(); err == nil {
			r.NextID, err = d.dec.DecodeUint64()
		}
		if err == nil && n == 4 {
			r.Now, err = d.dec.DecodeInt64()
		}
		if err != nil {
			err = corrupt("snapshot header", err)
		}
	case r.Kind == RecTask && n == 2:
		r.Task, err = d.task()
	case r.Kind == RecKV && n == 6:
		if r.KV.Project, r.KV.Scope, r.KV.Key, err = d.strings3(); err == nil {
			var ref ValueRef
			if r.KV.Value, ref, err = d.value(); err == nil {
				r.KV.Version, err = d.dec.DecodeUint64()
			}
			if !ref.IsZero() {
				r.KV.Ref = &ref
			}
		}
		if err != nil {
			err = corrupt("kv record", err)
		}
	case r.Kind == RecIdem && (n == 7 || n == 8):
		r.Idem, err = d.idemFields(n == 8)
	case r.Kind == RecDep && n == 3:
		r.Dep, err = d.dep()
	case r.Kind == RecTotals && n == 10:
		q := &r.Totals
		if q.Queue.Project, q.Queue.Scope, q.Queue.Name, err = d.strings3(); err == nil {
			for _, p := range [...]*uint64{&q.Enqueued, &q.Claimed, &q.Completed, &q.Retried, &q.DeadLettered} {
				if err == nil {
					*p, err = d.dec.DecodeUint64()
				}
			}
			if err == nil {
				q.Idle, err = d.dec.DecodeInt64()
			}
		}
		if err != nil {
			err = corrupt("totals record", err)
		}
	case r.Kind == RecConf && (n == 11 || n == 12 || n == 15):
		r.Conf, err = d.confFields(n - 1)
	case r.Kind == RecBucket && n == 7:
		r.Bucket, err = d.bucket(true)
	default:
		err = corrupt(fmt.Sprintf("record kind %d with %d fields", kind, n), nil)
	}
	if err == nil && d.r.Len() != 0 {
		err = corrupt(fmt.Sprintf("%d bytes after record", d.r.Len()), nil)
	}
	return r, err
}
