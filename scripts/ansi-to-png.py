#!/usr/bin/python3
"""Renders a terminal capture with colours (`tmux capture-pane -e -p`) to a
PNG, cell by cell in DejaVu Sans Mono: the README's screenshot comes from a
real terminal, not from a drawing of one.

    ansi-to-png.py capture.ansi out.png
"""
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SIZE = 14
BASE = [(0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16), (36, 114, 200),
        (188, 63, 188), (17, 168, 205), (229, 229, 229), (102, 102, 102), (241, 76, 76),
        (35, 209, 139), (245, 245, 67), (59, 142, 234), (214, 112, 214), (41, 184, 219),
        (255, 255, 255)]
FG, BG = (204, 204, 204), (24, 24, 24)


def xterm(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return (v, v, v)


def cells(text):
    """Yields rows of (char, fg, bg, bold) from ANSI text."""
    fg, bg, bold, rev, dim = FG, BG, False, False, False
    for line in text.split("\n"):
        row = []
        for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b])", line):
            if m.group(2) is not None:
                f, b = (bg, fg) if rev else (fg, bg)
                if dim:
                    f = tuple(c * 2 // 3 for c in f)
                row.append((m.group(2), f, b, bold))
                continue
            codes = [int(c) if c else 0 for c in m.group(1).split(";")]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    fg, bg, bold, rev, dim = FG, BG, False, False, False
                elif c == 1:
                    bold = True
                elif c == 2:
                    dim = True
                elif c == 22:
                    bold, dim = False, False
                elif c == 7:
                    rev = True
                elif c == 27:
                    rev = False
                elif 30 <= c <= 37:
                    fg = BASE[c - 30]
                elif 90 <= c <= 97:
                    fg = BASE[c - 90 + 8]
                elif c == 39:
                    fg = FG
                elif 40 <= c <= 47:
                    bg = BASE[c - 40]
                elif 100 <= c <= 107:
                    bg = BASE[c - 100 + 8]
                elif c == 49:
                    bg = BG
                elif c in (38, 48) and i + 1 < len(codes):
                    if codes[i + 1] == 5 and i + 2 < len(codes):
                        col = xterm(codes[i + 2])
                        i += 2
                    elif codes[i + 1] == 2 and i + 4 < len(codes):
                        col = tuple(codes[i + 2:i + 5])
                        i += 4
                    else:
                        col = FG if c == 38 else BG
                    if c == 38:
                        fg = col
                    else:
                        bg = col
                i += 1
        yield row


def main():
    text = open(sys.argv[1], encoding="utf-8").read().rstrip("\n")
    rows = list(cells(text))
    font, bold = ImageFont.truetype(FONT, SIZE), ImageFont.truetype(BOLD, SIZE)
    cw = int(font.getlength("M"))
    ch = SIZE + 4
    width = max(len(r) for r in rows)
    img = Image.new("RGB", (width * cw + 16, len(rows) * ch + 16), BG)
    d = ImageDraw.Draw(img)
    for y, row in enumerate(rows):
        for x, (c, f, b, is_bold) in enumerate(row):
            px, py = 8 + x * cw, 8 + y * ch
            if b != BG:
                d.rectangle([px, py, px + cw - 1, py + ch - 1], fill=b)
            if c != " ":
                d.text((px, py + 1), c, font=bold if is_bold else font, fill=f)
    img.save(sys.argv[2], optimize=True)


if __name__ == "__main__":
    main()
