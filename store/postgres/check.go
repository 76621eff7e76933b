package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Check verifies what PostgreSQL does not know of: that the schema is the one this loopbot
// writes, that every record decodes (a run's head and data agreeing on its ID and status),
// and that each run's items stand in an unbroken sequence from 0. It reads in one snapshot and changes nothing.
func (db *DB) Check(ctx context.Context) error {
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if want := SchemaVersion(); v != want {
		return fmt.Errorf("check store %s: schema version %d, want %d", db.url, v, want)
	}
	var problems []error
	problems = nil
	err = db.do(ctx, false, func(t *tx) error {
		problems = problems[:0]
		rows, err := t.query("SELECT id, status, head, data FROM runs ORDER BY seq")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, status string
			var head, data []byte
			if err := rows.Scan(&id, &status, &head, &data); err != nil {
				return err
			}
			var h, r struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			}
			if err := errors.Join(json.Unmarshal(head, &h), json.Unmarshal(data, &r)); err != nil {
				problems = append(problems, fmt.Errorf("run %s does not decode: %w", id, err))
				continue
			}
			if h.ID != id || r.ID != id || h.Status != status || r.Status != status {
				problems = append(problems, fmt.Errorf("run %s: columns (%s) and record (%s %s, head %s %s) disagree", id, status, r.ID, r.Status, h.ID, h.Status))
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Every item belongs to a run, and each run's lists run from 0 without a gap.
		rows, err = t.query(`SELECT i.run_id, i.kind::text, count(*), max(i.idx), bool_and(r.id IS NOT NULL)
			FROM run_items i LEFT JOIN runs r ON r.id = i.run_id GROUP BY i.run_id, i.kind ORDER BY 1, 2`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, kind string
			var n, last int
			var hasRun bool
			if err := rows.Scan(&id, &kind, &n, &last, &hasRun); err != nil {
				rows.Close()
				return err
			}
			if !hasRun {
				problems = append(problems, fmt.Errorf("run items of kind %s name no run %s", kind, id))
			}
			if last != n-1 {
				problems = append(problems, fmt.Errorf("run %s: %d items of kind %s up to index %d: the sequence is broken", id, n, kind, last))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range []string{
			"SELECT 'run item ' || run_id || '/' || kind::text || idx, data FROM run_items",
			"SELECT bucket || '/' || key, data FROM records",
			"SELECT 'approval ' || id, data FROM approvals",
			"SELECT 'audit ' || seq, data FROM audit",
			"SELECT 'outbox ' || key, data FROM outbox",
		} {
			rows, err := t.query(q)
			if err != nil {
				return err
			}
			for rows.Next() {
				var name string
				var data []byte
				if err := rows.Scan(&name, &data); err != nil {
					rows.Close()
					return err
				}
				if !json.Valid(data) {
					problems = append(problems, fmt.Errorf("%s is not JSON", name))
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check store %s: %w", db.url, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("check store %s: %w", db.url, errors.Join(problems...))
	}
	return nil
}
