package allocators

import (
	"fmt"
	"slices"
	"strings"
)

// Help lists every allocator and option, from the allocators' own table,
// for a command's help.
func Help() string {
	var b strings.Builder
	for _, f := range Factories() {
		fmt.Fprintf(&b, "\n  %-8s %s\n", f.Name, f.Summary)
		for _, opt := range f.Options {
			fmt.Fprintf(&b, "      %s.%s=%s\n          %s\n", f.Name, opt.Key, opt.Default, opt.Help)
		}
	}
	b.WriteString("\n  space    the device under each allocator (--space, --set space.KEY=VALUE)\n")
	for _, opt := range SpaceOptions() {
		fmt.Fprintf(&b, "      space.%s=%s\n          %s\n", opt.Key, opt.Default, opt.Help)
	}
	return b.String()
}

// ParseSets splits --set values, NAME.KEY=VALUE, into options per
// allocator and for the space (NAME space); names are the allocators
// being replayed, the only ones an option may be for.
func ParseSets(sets, names []string) (map[string]Options, Options, error) {
	per := map[string]Options{}
	space := Options{}
	for _, s := range sets {
		kv, v, ok := strings.Cut(s, "=")
		name, key, ok2 := strings.Cut(kv, ".")
		if !ok || !ok2 || name == "" || key == "" {
			return nil, nil, fmt.Errorf("--set %q: want NAME.KEY=VALUE, e.g. bfc.allow_growth=false", s)
		}
		if name == "space" {
			space[key] = v
			continue
		}
		if _, err := Lookup(name); err != nil {
			return nil, nil, fmt.Errorf("--set %s: %w", s, err)
		}
		if !slices.Contains(names, name) {
			return nil, nil, fmt.Errorf("--set %s: %s is not being replayed (-a %s)", s, name, strings.Join(names, ","))
		}
		if per[name] == nil {
			per[name] = Options{}
		}
		per[name][key] = v
	}
	return per, space, nil
}
