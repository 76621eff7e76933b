package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The parts a process's resident set is split into. The binary's own parts are its ELF
// sections, grouped by what they hold: code (.text), read-only data (.rodata, the type and
// interface tables), the function table the runtime reads to unwind stacks, print traces and
// scan stacks in the GC (.gopclntab), and writable data (.data, .noptrdata, .bss,
// .noptrbss). The rest is every other file mapped (the C library and its loader in a cgo
// build, the database file), and anonymous memory: the Go heap, goroutine stacks and the
// runtime's own.
const (
	partText    = "text"
	partRodata  = "rodata"
	partPclntab = "pclntab"
	partData    = "data"
	partLibs    = "other_files"
	partAnon    = "runtime"
)

// residentParts are the parts in the order the scenario prints them.
var residentParts = []string{partText, partRodata, partPclntab, partData, partLibs, partAnon}

// sectionPart says which part an allocated section of a Go binary belongs to.
func sectionPart(name string) string {
	switch name {
	case ".text", ".plt", ".init", ".fini":
		return partText
	case ".gopclntab":
		return partPclntab
	case ".data", ".noptrdata", ".bss", ".noptrbss", ".go.buildinfo", ".go.fipsinfo", ".go.module",
		".got", ".got.plt", ".dynamic", ".data.rel.ro", ".init_array", ".fini_array":
		return partData
	}
	return partRodata // .rodata, .typelink, .itablink, notes and the dynamic linker's tables
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end uint64
	offset     uint64
	path       string // empty for anonymous memory
}

// residentKB splits the resident set of process pid, whose executable is bin, into the
// parts above, in KB. It reads which pages are present from /proc/PID/pagemap, so a page
// of the binary counts for the section it holds; a page two sections share counts for the
// one that starts it. Pages of the binary past the end of its file (.bss and .noptrbss are
// anonymous memory the kernel maps after the data) count for their section too.
func residentKB(pid int, bin string) (map[string]int64, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("read the binary's sections: %w", err)
	}
	defer f.Close()
	maps, err := readMaps(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, fmt.Errorf("read the page map: %w", err)
	}
	defer pm.Close()

	exe, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, fmt.Errorf("resolve the binary's path: %w", err)
	}
	exe, err = filepath.Abs(exe)
	if err != nil {
		return nil, err
	}
	bias := loadBias(f, maps, exe)
	type section struct {
		start, end uint64
		part       string
	}
	var sections []section
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Addr == 0 || s.Size == 0 || s.Flags&elf.SHF_TLS != 0 {
			continue
		}
		sections = append(sections, section{s.Addr + bias, s.Addr + bias + s.Size, sectionPart(s.Name)})
	}
	slices.SortFunc(sections, func(a, b section) int { return cmpUint(a.start, b.start) })
	// partOf returns the part of the binary's page at addr, or "" when no section of the
	// binary is on that page.
	partOf := func(addr uint64) string {
		i, _ := slices.BinarySearchFunc(sections, addr+pageSize, func(s section, a uint64) int { return cmpUint(s.start, a) })
		for i--; i >= 0; i-- {
			s := sections[i]
			if s.end > addr {
				return s.part
			}
			if s.start < addr {
				break
			}
		}
		return ""
	}

	kb := map[string]int64{}
	entry := make([]byte, 8)
	for _, m := range maps {
		if m.path == "[vsyscall]" {
			continue // not in the page map, and not counted in VmRSS
		}
		for addr := m.start; addr < m.end; addr += pageSize {
			if _, err := pm.ReadAt(entry, int64(addr/pageSize*8)); err != nil {
				if err == io.EOF {
					break
				}
				return nil, fmt.Errorf("read the page map: %w", err)
			}
			if binary.LittleEndian.Uint64(entry)&(1<<63) == 0 {
				continue // not present
			}
			part := ""
			if m.path == exe || m.path == "" || m.path == "[heap]" {
				part = partOf(addr)
			}
			switch {
			case part != "":
			case m.path == "" || strings.HasPrefix(m.path, "["):
				part = partAnon
			default:
				part = partLibs
			}
			kb[part] += pageSize / 1024
		}
	}
	return kb, nil
}

const pageSize = 4096

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loadBias is how far from its linked addresses the binary was loaded: zero for the
// default non-PIE build, the mapping's start for a PIE.
func loadBias(f *elf.File, maps []mapping, exe string) uint64 {
	for _, m := range maps {
		if m.path != exe {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Off&^(pageSize-1) == m.offset {
				return m.start - p.Vaddr&^(pageSize-1)
			}
		}
	}
	return 0
}

// readMaps parses /proc/PID/maps.
func readMaps(path string) ([]mapping, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the mappings: %w", err)
	}
	defer file.Close()
	var out []mapping
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		m, err := parseMapsLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("read the mappings: %w", err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// parseMapsLine parses one line of /proc/PID/maps:
// "00400000-00c06000 r-xp 00000000 08:01 1234   /path/to/bin".
func parseMapsLine(line string) (mapping, error) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return mapping{}, fmt.Errorf("short line %q", line)
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return mapping{}, fmt.Errorf("no range in %q", line)
	}
	var m mapping
	var err error
	if m.start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return mapping{}, fmt.Errorf("range of %q: %w", line, err)
	}
	if m.end, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return mapping{}, fmt.Errorf("range of %q: %w", line, err)
	}
	if m.offset, err = strconv.ParseUint(fields[2], 16, 64); err != nil {
		return mapping{}, fmt.Errorf("offset of %q: %w", line, err)
	}
	// A path may hold spaces: it is the rest of the line after the fifth field, the inode.
	rest := line
	for range 5 {
		rest = strings.TrimLeft(rest, " \t")
		rest = rest[strings.IndexAny(rest+" ", " \t"):]
	}
	m.path = strings.TrimSpace(rest)
	return m, nil
}
