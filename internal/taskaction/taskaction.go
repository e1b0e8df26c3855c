package taskaction

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/docketdb/docket/engine"
)

// Kind is how a field of an action's options is given as text.
type Kind int

const (
	Time     Kind = iota + 1 // time.Time: an RFC 3339 time, or how long from now
	Duration                 // time.Duration
	Int                      // a signed integer
	OptInt                   // a pointer to a signed integer: unset is nil
	String                   // a string
	Bool                     // a bool
)

var kindNames = [...]string{Time: "time", Duration: "duration", Int: "int", OptInt: "optional int", String: "string", Bool: "bool"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Field is one field of an action's options.
type Field struct {
	Name  string // the Go field's name: "At"
	Flag  string // its name in lower kebab case: "at", "max-attempts"
	Label string // its name in words, for a form: "At", "Max attempts"
	Kind  Kind
	index int
	typ   reflect.Type
}

// Placeholder is what a field's text looks like: TIME, DUR, N, TEXT ("" for
// a bool).
func (f Field) Placeholder() string {
	switch f.Kind {
	case Time:
		return "TIME"
	case Duration:
		return "DUR"
	case Int, OptInt:
		return "N"
	case String:
		return "TEXT"
	}
	return ""
}

// Want says what text a field takes.
func (f Field) Want() string {
	switch f.Kind {
	case Time:
		return "an RFC 3339 time (2006-01-02T15:04:05Z) or how long from now (10m, +2h, 0 for now)"
	case Duration:
		return "a duration (10s, 5m, 2h)"
	case Int:
		return "a whole number"
	case OptInt:
		return "a whole number (unset keeps it)"
	case String:
		return "text"
	}
	return "true or false"
}

// Action is a task action of engine.Queue.
type Action struct {
	Method string // the method's name: "Reschedule"
	Name   string // in kebab case: "reschedule", "run-now"
	// Fields are the fields of the options, in order; none for an action
	// without options.
	Fields []Field
	// Opts names the options' type ("Reschedule"), "" without options.
	Opts string
	// Doc is the method's documentation in engine.Queue, one paragraph
	// ("Reschedule moves a ready, scheduled or waiting task ..."); "" for
	// a method of another interface (Of).
	Doc  string
	typ  reflect.Type // the method's, without its receiver
	opts reflect.Type // nil without options
}

// Summary is the first sentence of the action's documentation, "" if it
// has none.
func (a *Action) Summary() string {
	if i := strings.Index(a.Doc, ". "); i >= 0 {
		return a.Doc[:i+1]
	}
	return a.Doc
}

// Title is the action's name in words, capitalised: "Reschedule", "Run now".
func (a *Action) Title() string { return capitalise(strings.ReplaceAll(a.Name, "-", " ")) }

// Past is the action's name in the past tense, in words: "rescheduled",
// "ran now".
func (a *Action) Past() string {
	first, rest, _ := strings.Cut(a.Name, "-")
	if rest != "" {
		rest = " " + strings.ReplaceAll(rest, "-", " ")
	}
	return pastTense(first) + rest
}

var (
	queueType   = reflect.TypeFor[engine.Queue]()
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
	timeType    = reflect.TypeFor[time.Time]()
	durType     = reflect.TypeFor[time.Duration]()
)

// Actions returns the task actions of engine.Queue in the order of its
// methods' names. They are found once; the caller must not change them.
var Actions = sync.OnceValue(func() []*Action { return Of(queueType) })

// Lookup returns the task action named name ("reschedule"), or nil.
func Lookup(name string) *Action {
	for _, a := range Actions() {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Of returns the task actions among the methods of the interface t (Actions
// is Of engine.Queue): a test gives an interface that adds one.
func Of(t reflect.Type) []*Action {
	var out []*Action
	for i := range t.NumMethod() {
		m := t.Method(i)
		mt := m.Type
		if mt.IsVariadic() || mt.NumIn() < 2 || mt.NumIn() > 3 || mt.NumOut() != 1 || mt.Out(0) != errorType ||
			mt.In(0) != contextType || mt.In(1).Kind() != reflect.Uint64 {
			continue
		}
		a := &Action{Method: m.Name, Name: Kebab(m.Name), typ: mt}
		if t == queueType {
			a.Doc = methodDocs[m.Name]
		}
		if mt.NumIn() == 3 {
			fields, ok := fieldsOf(mt.In(2))
			if !ok {
				continue
			}
			a.Fields, a.opts, a.Opts = fields, mt.In(2), mt.In(2).Name()
		}
		out = append(out, a)
	}
	return out
}

// fieldsOf returns the fields of the struct type t, and false if t is not a
// struct of fields of simple kinds.
func fieldsOf(t reflect.Type) ([]Field, bool) {
	if t.Kind() != reflect.Struct || t.NumField() == 0 {
		return nil, false
	}
	var fs []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Anonymous {
			return nil, false
		}
		f := Field{Name: sf.Name, Flag: Kebab(sf.Name), Label: capitalise(strings.ReplaceAll(Kebab(sf.Name), "-", " ")), index: i, typ: sf.Type}
		switch ft := sf.Type; {
		case ft == timeType:
			f.Kind = Time
		case ft == durType:
			f.Kind = Duration
		case isInt(ft):
			f.Kind = Int
		case ft.Kind() == reflect.Pointer && isInt(ft.Elem()):
			f.Kind = OptInt
		case ft.Kind() == reflect.String:
			f.Kind = String
		case ft.Kind() == reflect.Bool:
			f.Kind = Bool
		default:
			return nil, false
		}
		fs = append(fs, f)
	}
	return fs, true
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return t != durType
	}
	return false
}

// Error is an action's arguments that cannot be read: a field's text
// (Field is set), or none given where the action has options (Field is
// nil: nothing to change).
type Error struct {
	Action *Action
	Field  *Field
	Value  string
	Why    string
}

func (e *Error) Error() string {
	if e.Field == nil {
		names := make([]string, len(e.Action.Fields))
		for i, f := range e.Action.Fields {
			names[i] = "-" + f.Flag
		}
		return e.Why + ": give " + OrList(names)
	}
	return fmt.Sprintf("%s %q: %s", e.Field.Flag, e.Value, e.Why)
}

// Input is an action's arguments, read and checked; Call runs the action
// with them.
type Input struct {
	a    *Action
	opts reflect.Value // of a.opts, the fields read; invalid without options
	// fromNow are the time fields given as how long from now.
	fromNow map[int]time.Duration
}

// Parse reads the action's arguments: get returns the text given for a
// field (by the field), ok false (or "") when none was. An action with
// options needs at least one given: zero options would change nothing
// (the engine refuses them, as Reschedule does).
func (a *Action) Parse(get func(f *Field) (string, bool)) (Input, error) {
	in := Input{a: a}
	if a.opts == nil {
		return in, nil
	}
	in.opts = reflect.New(a.opts).Elem()
	given := 0
	for i := range a.Fields {
		f := &a.Fields[i]
		s, ok := get(f)
		s = strings.TrimSpace(s)
		if !ok || s == "" {
			continue
		}
		given++
		bad := func(why string) error { return &Error{Action: a, Field: f, Value: s, Why: why} }
		v := in.opts.Field(f.index)
		switch f.Kind {
		case Time:
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				v.Set(reflect.ValueOf(t))
				continue
			}
			d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
			switch {
			case err != nil:
				return Input{}, bad("want " + f.Want())
			case d < 0 || d > engine.MaxDuration:
				return Input{}, bad(fmt.Sprintf("how long from now must be 0..%v (for a time in the past, give the time)", engine.MaxDuration))
			}
			if in.fromNow == nil {
				in.fromNow = map[int]time.Duration{}
			}
			in.fromNow[f.index] = d
		case Duration:
			d, err := time.ParseDuration(s)
			if err != nil {
				return Input{}, bad("want " + f.Want())
			}
			v.SetInt(int64(d))
		case Int, OptInt:
			t := f.typ
			if f.Kind == OptInt {
				t = t.Elem()
			}
			n, err := strconv.ParseInt(s, 10, t.Bits())
			switch {
			case errors.Is(err, strconv.ErrRange):
				return Input{}, bad(fmt.Sprintf("out of range for a whole number of %d bits", t.Bits()))
			case err != nil:
				return Input{}, bad("want a whole number")
			}
			if f.Kind == OptInt {
				p := reflect.New(t)
				p.Elem().SetInt(n)
				v.Set(p)
			} else {
				v.SetInt(n)
			}
		case String:
			v.SetString(s)
		case Bool:
			b, err := strconv.ParseBool(s)
			if err != nil {
				return Input{}, bad("want true or false")
			}
			v.SetBool(b)
		}
	}
	if given == 0 {
		return Input{}, &Error{Action: a, Why: "nothing to change"}
	}
	return in, nil
}

// Opts returns the options Call passes, the times given as how long from
// now counted from now; nil for an action without options.
func (in Input) Opts(now time.Time) any {
	if !in.opts.IsValid() {
		return nil
	}
	v := reflect.New(in.opts.Type()).Elem()
	v.Set(in.opts)
	for i, d := range in.fromNow {
		v.Field(i).Set(reflect.ValueOf(now.Add(d)))
	}
	return v.Interface()
}

// Call runs the action on task id of q; the times given as how long from
// now count from now (the DB's clock). q has the action's method when the
// action is one of Actions; one of Of another interface needs a q that
// implements it too.
func (in Input) Call(ctx context.Context, q engine.Queue, id uint64, now time.Time) error {
	m := reflect.ValueOf(q).MethodByName(in.a.Method)
	if !m.IsValid() || m.Type() != in.a.typ {
		return fmt.Errorf("%w: this queue has no task action %s", engine.ErrInvalid, in.a.Method)
	}
	args := []reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(id)}
	if in.opts.IsValid() {
		args = append(args, reflect.ValueOf(in.Opts(now)))
	}
	if err := m.Call(args)[0].Interface(); err != nil {
		return err.(error)
	}
	return nil
}

// Kebab returns a Go name in lower kebab case: "RunNow" is "run-now",
// "MaxInFlight" "max-in-flight", "TTLSeconds" "ttl-seconds".
func Kebab(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// irregular are the past tenses of verbs a task action may start with that
// do not take -ed.
var irregular = map[string]string{"run": "ran", "set": "set", "reset": "reset", "put": "put", "split": "split"}

// pastTense returns the past tense of the English verb v (lower case).
func pastTense(v string) string {
	if p, ok := irregular[v]; ok {
		return p
	}
	n := len(v)
	switch {
	case n == 0:
		return v
	case v[n-1] == 'e':
		return v + "d"
	case v[n-1] == 'y' && n > 1 && !isVowel(v[n-2]):
		return v[:n-1] + "ied"
	case n >= 3 && !isVowel(v[n-1]) && !strings.ContainsRune("wxy", rune(v[n-1])) && isVowel(v[n-2]) && !isVowel(v[n-3]) &&
		(syllables(v) == 1 || v[n-1] == 'l'):
		return v + v[n-1:] + "ed" // tag: tagged; cancel: cancelled, as the project spells it
	}
	return v + "ed"
}

func isVowel(b byte) bool { return strings.IndexByte("aeiou", b) >= 0 }

// syllables counts the groups of vowels of v.
func syllables(v string) int {
	n := 0
	for i := range len(v) {
		if isVowel(v[i]) && (i == 0 || !isVowel(v[i-1])) {
			n++
		}
	}
	return n
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// OrList joins names as "a", "a or b", "a, b or c".
func OrList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
