package index

import (
	"slices"
	"testing"
)

// TestFitsAt: a str or bin value of each header size passes when its
// bytes are all there and fails one byte short, or with its header cut;
// other values, and the end of the input, pass.
func TestFitsAt(t *testing.T) {
	for _, c := range []struct {
		name string
		hdr  []byte // declaring 3 bytes
	}{
		{"bin8", []byte{0xc4, 3}}, {"str8", []byte{0xd9, 3}},
		{"bin16", []byte{0xc5, 0, 3}}, {"str16", []byte{0xda, 0, 3}},
		{"bin32", []byte{0xc6, 0, 0, 0, 3}}, {"str32", []byte{0xdb, 0, 0, 0, 3}},
	} {
		lead := []byte{0x93} // the value at offset 1
		whole := append(append(slices.Clone(lead), c.hdr...), 'a', 'b', 'c')
		if err := FitsAt(whole, 1); err != nil {
			t.Errorf("%s with its 3 bytes: %v", c.name, err)
		}
		if err := FitsAt(whole[:len(whole)-1], 1); err == nil {
			t.Errorf("%s one byte short passed", c.name)
		}
		if err := FitsAt(whole[:len(c.hdr)], 1); err == nil {
			t.Errorf("%s with its header cut passed", c.name)
		}
	}
	for _, data := range [][]byte{{}, {0xa3, 'a'}, {0x01}, {0xcf, 1, 2}} {
		if err := FitsAt(data, 0); err != nil {
			t.Errorf("%x: %v", data, err)
		}
	}
	if err := FitsAt([]byte{0xc4, 9}, 2); err != nil {
		t.Errorf("at the end: %v", err)
	}
}
