// Package printers renders API objects as meta.k8s.io/v1 Table rows, so that an
// unmodified `kubectl get` (which asks the server for a Table) prints the same
// columns, in the same order and with the same cell formats, as it does against
// Kubernetes. One Printer per kind; ToTable turns an object or a list into a
// Table.
//
// The package owns column definitions and cell formatting only. It is pure: it
// takes the object and the current time and returns values. It must not touch
// storage, HTTP content negotiation or the scheme; the API server's handlers
// decide when a Table is wanted and how it is encoded.
//
// The server always renders the "wide" columns (priority 1); kubectl hides them
// unless asked for -o wide. That is what Kubernetes' own API server does too.
package printers

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Printer renders one kind as Table rows.
type Printer struct {
	// Columns describes every cell Cells returns, in order. The first column
	// carrying Format "name" is the object's name; Priority 1 marks columns
	// kubectl shows only with -o wide.
	Columns []metav1.TableColumnDefinition
	// Cells returns the row cells for one object (e.g. *corev1.Node) at time
	// now; ages are relative to now. It fails if obj is not the kind this
	// Printer renders.
	Cells func(obj runtime.Object, now time.Time) ([]interface{}, error)

	// conditions optionally annotates a row (pods mark finished pods as
	// Completed, as Kubernetes does). Nil means no row conditions.
	conditions func(obj runtime.Object) []metav1.TableRowCondition
}

// ToTable builds a Table from a single object or a list (anything
// meta.ExtractList accepts). Each row's object is the item's metadata as a
// meta.k8s.io/v1 PartialObjectMetadata, which is what kubectl reads for the
// NAMESPACE column and for -w; it shares maps with obj, so callers must not
// mutate obj while the Table is in use. The Table's resourceVersion, continue
// and remainingItemCount come from the list (resourceVersion from the object
// for a single object). includeHeaders controls whether columnDefinitions are
// filled in.
func (p Printer) ToTable(obj runtime.Object, now time.Time, includeHeaders bool) (*metav1.Table, error) {
	table := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: metav1.SchemeGroupVersion.String()},
	}
	if includeHeaders {
		table.ColumnDefinitions = slices.Clone(p.Columns)
	}

	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, fmt.Errorf("extract list items from %T: %w", obj, err)
		}
		list, err := meta.ListAccessor(obj)
		if err != nil {
			return nil, fmt.Errorf("read list metadata of %T: %w", obj, err)
		}
		table.ResourceVersion = list.GetResourceVersion()
		table.Continue = list.GetContinue()
		table.RemainingItemCount = list.GetRemainingItemCount()
	} else {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
		}
		table.ResourceVersion = m.GetResourceVersion()
	}

	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, item := range items {
		row, err := p.row(item, now)
		if err != nil {
			return nil, err
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

func (p Printer) row(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return metav1.TableRow{}, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	cells, err := p.Cells(obj, now)
	if err != nil {
		return metav1.TableRow{}, err
	}
	if len(cells) != len(p.Columns) {
		return metav1.TableRow{}, fmt.Errorf("print %T %q: got %d cells for %d columns", obj, m.GetName(), len(cells), len(p.Columns))
	}
	partial := meta.AsPartialObjectMetadata(m)
	partial.TypeMeta = metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: metav1.SchemeGroupVersion.String()}
	row := metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: partial}}
	if p.conditions != nil {
		row.Conditions = p.conditions(obj)
	}
	return row, nil
}

// Default is the fallback for kinds without a dedicated printer: the name and
// the creation time in RFC 3339 (UTC), like the API server's default table
// convertor.
func Default() Printer {
	return Printer{
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Created At", Type: "date", Description: objectMetaDoc("creationTimestamp")},
		},
		Cells: func(obj runtime.Object, _ time.Time) ([]interface{}, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
			}
			return []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
		},
	}
}

// cellsOf adapts a typed cell function to Printer.Cells, failing on any other
// type.
func cellsOf[T runtime.Object](cells func(T, time.Time) []interface{}) func(runtime.Object, time.Time) ([]interface{}, error) {
	return func(obj runtime.Object, now time.Time) ([]interface{}, error) {
		t, ok := obj.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("print %T: unexpected object type %T", want, obj)
		}
		return cells(t, now), nil
	}
}

// objectMetaDoc is the API documentation of one ObjectMeta field, which
// Kubernetes uses as the description of its Name and Age columns.
func objectMetaDoc(field string) string {
	return metav1.ObjectMeta{}.SwaggerDoc()[field]
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc("name")}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc("creationTimestamp")}
}

// column is a normal (always shown) column.
func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wideColumn is shown by kubectl only with -o wide.
func wideColumn(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description, Priority: 1}
}

// age is how long ago t was, as kubectl prints it ("5m", "3d2h"), or
// "<unknown>" for a zero time.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// microAge is age for a MicroTime.
func microAge(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
