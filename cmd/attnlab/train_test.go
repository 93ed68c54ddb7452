package main

import (
	"testing"

	"github.com/attnlab/attnlab/train"
)

// TestTrainPresetsSetKnownFlags: every value of every preset names a flag
// of attnlab train and parses as its value.
func TestTrainPresetsSetKnownFlags(t *testing.T) {
	for _, name := range train.PresetNames() {
		fs, _ := trainCmd.flagSet()
		given := map[string]bool{}
		for _, need := range train.Presets[name].Needs {
			if fs.Lookup(need[0]) == nil {
				t.Errorf("-preset %s needs -%s, which attnlab train does not have", name, need[0])
			}
			given[need[0]] = true
		}
		if err := train.ApplyPreset(name, given, fs.Set); err != nil {
			t.Errorf("-preset %s: %v", name, err)
		}
	}
}
