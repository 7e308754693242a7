#!/usr/bin/env python3
"""Checks a rendered peakscope HTML report (tests/html/check_html.sh).

  check_dom.py DOM.html REPORT.json SCREENSHOT.png [CHECK.json]

DOM.html is Chromium's --dump-dom of the page, REPORT.json what
`peakscope report --json` printed for the same trace. Checks that every figure
the page carries (data-psc attributes) is the report's (the accuracy table's
are those of `peakscope check --json`, CHECK.json), and that the
screenshot is not blank: it must show the page's ink and the colours of the
categories that were live at the peak. Prints "ok NAME" / "not ok NAME" lines;
exits 1 on any failure. Standard library only (PNG decoded with zlib).
"""
import html.parser
import json
import struct
import sys
import zlib

CATEGORY_COLORS = {  # exchange/html/export_html.cc kColors
    "persistent": (0x8C, 0x8C, 0x8C), "boundary": (0x1F, 0x77, 0xB4), "adapter_gradient": (0xD6, 0x27, 0x28),
    "workspace": (0x2C, 0xA0, 0x2C), "input_gradient": (0x17, 0xBE, 0xCF), "output": (0x94, 0x67, 0xBD),
    "forward_scratch": (0xBC, 0xBD, 0x22), "first_execution": (0xFF, 0x7F, 0x0E),
}

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok " if ok else "not ok ") + name + ("" if ok or not detail else " # " + detail))
    if not ok:
        failures += 1


class Figures(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.figures, self._open = {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-psc" in a:
            value = a.get("data-bytes", a.get("data-value"))
            if value is not None:
                self.figures[a["data-psc"]] = value
            else:
                self._open.append([a["data-psc"], tag, ""])

    def handle_data(self, data):
        for entry in self._open:
            entry[2] += data

    def handle_endtag(self, tag):
        if self._open and self._open[-1][1] == tag:
            name, _, text = self._open.pop()
            self.figures[name] = text.strip()


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError("unsupported PNG (depth %d, colour type %d)" % (depth, color))
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, ul = prev[x], prev[x - channels] if x >= channels else 0
            if f == 1:
                line[x] = (line[x] + left) & 255
            elif f == 2:
                line[x] = (line[x] + up) & 255
            elif f == 3:
                line[x] = (line[x] + ((left + up) >> 1)) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    dom_path, report_path, png_path = sys.argv[1:4]
    report = json.load(open(report_path))
    parser = Figures()
    parser.feed(open(dom_path, encoding="utf-8").read())
    f = parser.figures

    def same(name, expected):
        check("dom %s = %s" % (name, expected), f.get(name) == str(expected), "page has %r" % f.get(name))

    same("peak_bytes", report["peak_bytes"])
    same("chart_peak_bytes", report["peak_bytes"])
    same("peak_time_ns", report["peak_time_ns"])
    same("events", report["events"])
    for category, value in report["live_at_peak_by_category"].items():
        same("peak_category_" + category, value)
    for w in report["waves"]:
        i = str(w["index"])
        if w["tokens"] is not None:
            same("wave_%s_tokens" % i, w["tokens"])
        for field in ("baseline_bytes", "peak_bytes", "measured_peak_bytes"):
            same("wave_%s_%s" % (i, field), w[field])
        for row in w["layers_at_peak"]:
            for field in ("boundary_bytes", "adapter_gradient_bytes", "workspace_bytes", "other_bytes"):
                same("wave_%s_layer_%d_%s" % (i, row["layer"], field), row[field])

    if len(sys.argv) > 4:
        checked = json.load(open(sys.argv[4]))
        for w in checked["waves"]:
            i = "accuracy_%d_" % w["wave"]
            for field in ("measured_peak_bytes", "raw_bytes", "required_bytes"):
                same(i + field, w[field])
            for field in ("raw_error", "admitted_error"):
                page = f.get(i + field)
                check("dom %s%s = %.6f" % (i, field, w[field]),
                      page is not None and abs(float(page) - w[field]) < 1e-6, "page has %r" % page)
        same("under_estimates", checked["summary"]["cold"]["under_estimates"] + checked["summary"]["warm"]["under_estimates"])

    width, height, channels, rows = png_pixels(png_path)
    counts, ink = {}, 0
    for line in rows:
        for x in range(0, width * channels, channels):
            rgb = (line[x], line[x + 1], line[x + 2])
            if rgb != (255, 255, 255):
                ink += 1
            counts[rgb] = counts.get(rgb, 0) + 1
    check("screenshot is not blank (%d of %d pixels drawn)" % (ink, width * height), ink > width * height // 50)
    for category, value in report["live_at_peak_by_category"].items():
        if value == 0:
            continue
        want = CATEGORY_COLORS[category]
        seen = sum(n for rgb, n in counts.items() if all(abs(a - b) <= 6 for a, b in zip(rgb, want)))
        check("screenshot shows %s (%d pixels)" % (category, seen), seen >= 100)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
