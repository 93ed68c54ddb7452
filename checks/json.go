package checks

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/attnlab/attnlab/gradcheck"
)

// JSON has no infinities or NaN, yet a broken implementation measures
// exactly those. They are written as the strings "+Inf", "-Inf" and "NaN".

func jsonFloat(x float64) any {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return x
}

func parseJSONFloat(raw json.RawMessage) (float64, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.ParseFloat(s, 64)
	}
	var x float64
	err := json.Unmarshal(raw, &x)
	return x, err
}

type resultJSON struct {
	Check   string          `json:"check"`
	Pass    bool            `json:"pass"`
	Detail  string          `json:"detail"`
	Error   json.RawMessage `json:"error"`
	Errored bool            `json:"errored,omitempty"`
}

// MarshalJSON writes r with a non-finite Error as a string.
func (r Result) MarshalJSON() ([]byte, error) {
	e, _ := json.Marshal(jsonFloat(r.Error))
	return json.Marshal(resultJSON{r.Check, r.Pass, r.Detail, e, r.Errored})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Result) UnmarshalJSON(data []byte) error {
	var j resultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*r = Result{Check: j.Check, Pass: j.Pass, Detail: j.Detail, Errored: j.Errored}
	if len(j.Error) == 0 {
		return nil
	}
	var err error
	r.Error, err = parseJSONFloat(j.Error)
	return err
}

type sweepRowJSON struct {
	Eps     any `json:"eps"`
	MaxAbs  any `json:"max_abs"`
	MaxRel  any `json:"max_rel"`
	NormRel any `json:"norm_rel"`
}

// MarshalJSON writes the sweep with non-finite errors as strings.
func (s Sweep) MarshalJSON() ([]byte, error) {
	rows := func(rs gradcheck.SweepRows) []sweepRowJSON {
		out := make([]sweepRowJSON, len(rs))
		for i, r := range rs {
			out[i] = sweepRowJSON{jsonFloat(r.Eps), jsonFloat(r.MaxAbs), jsonFloat(r.MaxRel), jsonFloat(r.NormRel)}
		}
		return out
	}
	return json.Marshal(struct {
		Config  string         `json:"config"`
		Central []sweepRowJSON `json:"central"`
		Precise []sweepRowJSON `json:"precise"`
	}{s.Config, rows(s.Central), rows(s.Precise)})
}
