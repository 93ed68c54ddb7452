// Package jsonerr words the errors of encoding/json for the user of a
// file: which field holds what instead of what it should, or where the
// text stops being JSON, never the Go types that decode it ("cannot
// unmarshal string into Go struct field Options.options.Steps of type
// int" becomes "field options.Steps: a string, want a number").
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Describe returns err reworded when it is a type or syntax error of
// encoding/json, and err itself otherwise (nil for nil). The reworded
// error wraps err.
func Describe(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the top level"
		} else {
			field = "field " + field
		}
		return &wrapped{fmt.Sprintf("%s: %s, want %s", field, article(te.Value), want(te.Type)), err}
	case errors.As(err, &se):
		return &wrapped{fmt.Sprintf("not JSON at byte %d: %s", se.Offset, se.Error()), err}
	}
	return err
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// article words a JSON value kind as json names it ("string", "number
// -1", "array"…).
func article(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "true or false"
	}
	return "a " + v
}

// want words what a Go type decodes from.
func want(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer >= 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return want(t.Elem())
	}
	return "another value"
}
