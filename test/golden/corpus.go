package golden

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
)

// linkPrefix is how many bytes of each chain link a record keeps: enough
// to name the first differing event, small enough to check in.
const linkPrefix = 4

// Record is what one rules version makes of one log.
type Record struct {
	Events    int    `json:"events"`
	Refused   int    `json:"refused"`
	Decisions string `json:"decisions"` // SHA-256 of the decisions, one JSON line each
	Chain     string `json:"chain"`     // the last chain link
	Links     string `json:"links"`     // every link's first bytes, hex, space separated
}

// Versions maps a log's name to its record under one rules version.
type Versions map[string]Record

// readLog reads a log: one stored envelope per line.
func readLog(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
	}
	return lines, sc.Err()
}

// logNames lists the corpus's logs, sorted.
func logNames(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".jsonl")
	}
	slices.Sort(names)
	return names, nil
}

// underRules returns the stored bytes of an event as folded under rules
// version v: a plan that names no version is stamped with v, except under
// version 1 where it stays as written before versions existed.
func underRules(line []byte, v domain.RulesVersion) ([]byte, error) {
	if v == domain.RulesV1 {
		return line, nil
	}
	env, err := events.ParseEnvelope(line)
	if err != nil || env.Type != events.TypePlan {
		return line, nil // refused events stay as they are
	}
	var pc events.PlanChange
	if err := json.Unmarshal(env.Data, &pc); err != nil || pc.Plan.Rules != 0 {
		return line, nil
	}
	pc.Plan.Rules = int(v)
	if env.Data, err = json.Marshal(pc); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// foldLog folds a log under version v, in pools made with opts. Each
// event's sequence is its line number; a log is one pool.
type folded struct {
	record    Record
	links     []string
	decisions [][]domain.Decision
	results   []domain.Result // what each event did (what its chain link covers besides its bytes)
}

func foldLog(lines [][]byte, v domain.RulesVersion, opts ...domain.PoolOption) (folded, error) {
	var f folded
	var pool *domain.Pool
	var chain domain.Hash
	digest := sha256.New()
	for i, line := range lines {
		raw, err := underRules(line, v)
		if err != nil {
			return f, err
		}
		seq := uint64(i + 1)
		st, err := stream.DecodeRaw(seq, raw)
		if err != nil {
			return f, fmt.Errorf("line %d: %w", seq, err)
		}
		if pool == nil {
			pool = domain.NewPool(st.Envelope.Pool, opts...)
		}
		res, link, err := projections.Fold(pool, nil, st, chain)
		if err != nil {
			return f, fmt.Errorf("line %d: %w", seq, err)
		}
		chain = link
		if res.Refused != "" {
			f.record.Refused++
		}
		for _, d := range res.Decisions {
			b, _ := json.Marshal(d)
			digest.Write(b)
			digest.Write([]byte{'\n'})
		}
		f.links = append(f.links, hex.EncodeToString(link[:linkPrefix]))
		f.decisions = append(f.decisions, res.Decisions)
		f.results = append(f.results, res.Result)
	}
	f.record.Events = len(lines)
	f.record.Decisions = hex.EncodeToString(digest.Sum(nil))
	f.record.Chain = hex.EncodeToString(chain[:])
	f.record.Links = strings.Join(f.links, " ")
	return f, nil
}

// readVersions reads the records of version v; ok is false when the
// version has none yet.
func readVersions(dir string, v domain.RulesVersion) (Versions, bool, error) {
	b, err := os.ReadFile(versionFile(dir, v))
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var vs Versions
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, false, fmt.Errorf("%s: %w", versionFile(dir, v), err)
	}
	return vs, true, nil
}

func writeVersions(dir string, v domain.RulesVersion, vs Versions) error {
	b, err := json.MarshalIndent(vs, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(versionFile(dir, v), append(b, '\n'), 0o644)
}

func versionFile(dir string, v domain.RulesVersion) string {
	return filepath.Join(dir, fmt.Sprintf("v%d.json", int(v)))
}
