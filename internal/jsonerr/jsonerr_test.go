package jsonerr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	type sched struct{ Total int }
	type opts struct {
		Steps    int
		Schedule sched
		Names    []string
		LR       float64 `json:"lr"`
	}
	var v struct {
		Options opts `json:"options"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"options": {"Steps": "x"}}`, "field options.Steps: a string, want an integer"},
		{`{"options": {"Schedule": [1]}}`, "field options.Schedule: an array, want an object"},
		{`{"options": {"lr": true}}`, "field options.lr: true or false, want a number"},
		{`{"options": {"Names": {}}}`, "field options.Names: an object, want an array"},
		{`[1]`, "the top level: an array, want an object"},
		{`{"options": `, "unexpected end of JSON input"},
		{`{"options" 1}`, "not JSON at byte 12: invalid character '1' after object key"},
	} {
		err := Describe(json.Unmarshal([]byte(c.in), &v))
		if err == nil || err.Error() != c.want && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "jsonerr.") {
			t.Errorf("%s: %v names Go types", c.in, err)
		}
	}
	var te *json.UnmarshalTypeError
	if err := Describe(json.Unmarshal([]byte(`{"options": {"Steps": "x"}}`), &v)); !errors.As(err, &te) {
		t.Errorf("the reworded error does not wrap json's: %v", err)
	}
	if Describe(nil) != nil {
		t.Error("Describe(nil) != nil")
	}
}
