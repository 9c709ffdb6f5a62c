"""Writes the documents tests/office.rs reads, with the tools people make them with
(python-docx, openpyxl, python-pptx, odfpy, msoffcrypto-tool), and what each holds.

    python make_documents.py OUT_DIR   ->  OUT_DIR/<files>, and truth.json on stdout

truth.json: {name: {"mime", "words": the text a reader must find, "cells": rows of the first
sheet (spreadsheets), "title", "author"}}. Hostile files (a zip bomb, an encrypted workbook, a
truncated document) carry only their mime.
"""

import io
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
truth = {}

MIME = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "epub": "application/epub+zip",
    "csv": "text/csv",
}

PARAGRAPHS = [
    "Revenue grew in every region this quarter, led by the northern stores.",
    "The board approved the new warehouse; construction starts in March.",
    "Costs stayed flat while headcount rose by twelve people.",
]
ITEMS = ["Open two stores", "Hire a data team", "Retire the old ledger"]
TABLE = [["Region", "Revenue", "Growth"], ["North", "1200", "8%"], ["South", "950", "3%"]]


def words(*parts):
    return " ".join(" ".join(p) if isinstance(p, list) else p for p in parts)


FOOTNOTE = "Figures audited by Babbage and Partners in March."


def footnote(doc, paragraph, text):
    """A footnote as Word writes one (python-docx has no API for it): a footnotes part with
    Word's two separator notes, and a reference run in `paragraph`."""
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    xml = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:footnotes xmlns:w="{w}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>'
        '<w:footnote w:id="1"><w:p><w:pPr><w:pStyle w:val="FootnoteText"/></w:pPr>'
        '<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteRef/></w:r>'
        f'<w:r><w:t xml:space="preserve"> {text}</w:t></w:r></w:p></w:footnote></w:footnotes>'
    ).encode()
    part = Part(
        PackURI("/word/footnotes.xml"),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml",
        xml,
        doc.part.package,
    )
    doc.part.relate_to(part, RT.FOOTNOTES)
    run = OxmlElement("w:r")
    properties = OxmlElement("w:rPr")
    style = OxmlElement("w:rStyle")
    style.set(qn("w:val"), "FootnoteReference")
    properties.append(style)
    run.append(properties)
    reference = OxmlElement("w:footnoteReference")
    reference.set(qn("w:id"), "1")
    run.append(reference)
    paragraph._p.append(run)


def docx():
    from docx import Document
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    doc = Document()
    doc.core_properties.title = "Quarterly report"
    doc.core_properties.author = "Ada Lovelace"
    doc.add_heading("Quarterly report", level=1)
    for text in PARAGRAPHS[:2]:
        doc.add_paragraph(text)
    doc.add_heading("Plans", level=2)
    for item in ITEMS:
        doc.add_paragraph(item, style="List Bullet")
    table = doc.add_table(rows=3, cols=3)
    for r, row in enumerate(TABLE):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    paragraph = doc.add_paragraph(PARAGRAPHS[2] + " Details: ")
    # A real hyperlink run, as Word writes one (python-docx has no API for it).
    rel = doc.part.relate_to("https://example.com/report", "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink", is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "full report"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    footnote(doc, paragraph, FOOTNOTE)
    doc.save(OUT / "report.docx")
    truth["report.docx"] = {
        "mime": MIME["docx"], "title": "Quarterly report", "author": "Ada Lovelace",
        "words": words("Quarterly report", PARAGRAPHS[:2], "Plans", ITEMS,
                       [v for row in TABLE for v in row], PARAGRAPHS[2], "Details: full report",
                       FOOTNOTE),
        "footnote": FOOTNOTE,
        "link": "https://example.com/report",
    }
    data = io.BytesIO((OUT / "report.docx").read_bytes()[:6000])
    (OUT / "truncated.docx").write_bytes(data.getvalue())
    truth["truncated.docx"] = {"mime": MIME["docx"]}


def cached_formulas(path, values):
    """openpyxl writes formulas without results; Excel and LibreOffice store the last result
    beside each formula. Put those results in, as a saved workbook has them."""
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    for cell, value in values.items():
        sheet = re.sub(rf'(<c r="{cell}"[^>]*>)<f>([^<]*)</f>(<v>\s*</v>|<v\s*/>)?',
                       rf"\1<f>\2</f><v>{value}</v>", sheet)
    parts["xl/worksheets/sheet1.xml"] = sheet.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)


def xlsx():
    from openpyxl import Workbook

    book = Workbook()
    book.properties.title = "Price list"
    book.properties.creator = "Grace Hopper"
    prices = book.active
    prices.title = "Prices"
    rows = [["item", "price", "qty", "total"], ["kettle", 24.5, 2, None], ["toaster", 31, 1, None],
            ["mug", 4.25, 12, None]]
    for r, row in enumerate(rows, start=1):
        for c, value in enumerate(row, start=1):
            if value is not None:
                prices.cell(row=r, column=c, value=value)
    for r in range(2, 5):
        prices.cell(row=r, column=4, value=f"=B{r}*C{r}")
    summary = book.create_sheet("Summary")
    summary["A1"] = "Totals by region"
    summary.merge_cells("A1:C1")
    summary.append(["region", "stores", "revenue"])
    summary.append(["North", 4, 1200])
    summary.append(["South", 3, 950])
    path = OUT / "prices.xlsx"
    book.save(path)
    cached_formulas(path, {"D2": 49, "D3": 31, "D4": 51})
    truth["prices.xlsx"] = {
        "mime": MIME["xlsx"], "title": "Price list", "author": "Grace Hopper",
        "cells": [["item", "price", "qty", "total"], ["kettle", "24.5", "2", "49"],
                  ["toaster", "31", "1", "31"], ["mug", "4.25", "12", "51"]],
        "words": words("Prices item price qty total kettle 24.5 2 49 toaster 31 1 31 mug 4.25 12 51",
                       "Summary Totals by region region stores revenue North 4 1200 South 3 950"),
    }
    big = Workbook(write_only=True)
    sheet = big.create_sheet("Orders")
    sheet.append(["order", "customer", "amount", "city"])
    for i in range(1, 50_001):
        sheet.append([i, f"customer {i % 977}", round(i * 1.25, 2), ["Oslo", "Lima", "Pune"][i % 3]])
    big.save(OUT / "orders.xlsx")
    truth["orders.xlsx"] = {"mime": MIME["xlsx"], "rows": 50_000}


def pptx():
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Launch plan"
    slides = [("Launch plan", ["Ship in May", "Two pilot customers"], "Mention the budget."),
              ("Risks", ["Supplier delays", "Hiring"], "Ask for questions.")]
    for title, bullets, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0]
        for bullet in bullets[1:]:
            body.add_paragraph().text = bullet
        slide.notes_slide.notes_text_frame.text = notes
    deck.save(OUT / "launch.pptx")
    truth["launch.pptx"] = {
        "mime": MIME["pptx"], "title": "Launch plan",
        # Speaker notes are labelled as such, as every converter labels them.
        "words": words(*(words(t, b, "Notes", n) for t, b, n in slides)),
    }


def odt():
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import A, H, List, ListItem, Note, NoteBody, NoteCitation, P

    doc = OpenDocumentText()
    from odf.dc import Creator, Title
    doc.meta.addElement(Title(text="Field notes"))
    doc.meta.addElement(Creator(text="Mary Anning"))
    doc.text.addElement(H(outlinelevel=1, text="Field notes"))
    first = P(text=PARAGRAPHS[0] + " ")
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="Measured in local currency."))
    note.addElement(body)
    first.addElement(note)
    doc.text.addElement(first)
    doc.text.addElement(H(outlinelevel=2, text="Plans"))
    items = List()
    for item in ITEMS:
        li = ListItem()
        li.addElement(P(text=item))
        items.addElement(li)
    doc.text.addElement(items)
    table = Table(name="Regions")
    table.addElement(TableColumn(numbercolumnsrepeated=3))
    for row in TABLE:
        tr = TableRow()
        for value in row:
            cell = TableCell()
            cell.addElement(P(text=value))
            tr.addElement(cell)
        table.addElement(tr)
    doc.text.addElement(table)
    last = P(text=PARAGRAPHS[1] + " See ")
    last.addElement(A(href="https://example.com/notes", text="the notes"))
    doc.text.addElement(last)
    doc.save(str(OUT / "notes.odt"))
    truth["notes.odt"] = {
        "mime": MIME["odt"], "title": "Field notes", "author": "Mary Anning",
        "words": words("Field notes", PARAGRAPHS[0], "1", "Plans", ITEMS,
                       [v for row in TABLE for v in row], PARAGRAPHS[1], "See the notes",
                       "Notes Measured in local currency."),
        "link": "https://example.com/notes",
    }


def ods():
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    doc = OpenDocumentSpreadsheet()
    table = Table(name="Stock")
    rows = [["part", "count", "price"], ["bolt", 120, 0.25], ["nut", 80, 0.1]]
    for row in rows:
        tr = TableRow()
        for value in row:
            if isinstance(value, str):
                cell = TableCell(valuetype="string")
                cell.addElement(P(text=value))
            else:
                cell = TableCell(valuetype="float", value=value)
                cell.addElement(P(text=f"{value:,.2f}"))
            tr.addElement(cell)
        # What spreadsheet programs write after the last value: one cell repeated to the edge.
        tr.addElement(TableCell(numbercolumnsrepeated=1020))
        table.addElement(tr)
    table.addElement(TableRow(numberrowsrepeated=1048000))
    doc.spreadsheet.addElement(table)
    doc.save(str(OUT / "stock.ods"))
    truth["stock.ods"] = {
        "mime": MIME["ods"],
        "cells": [["part", "count", "price"], ["bolt", "120", "0.25"], ["nut", "80", "0.1"]],
        "words": "Stock part count price bolt 120 0.25 nut 80 0.1",
    }


def csv_file():
    text = "name;price;note\n\"Café, large\";3,50;\"says \"\"hi\"\"\"\nThé;2;\n"
    (OUT / "menu.csv").write_bytes(text.encode("windows-1252"))
    truth["menu.csv"] = {
        "mime": "text/csv",
        "cells": [["name", "price", "note"], ["Café, large", "3,50", 'says "hi"'], ["Thé", "2", ""]],
        "words": 'name price note Café, large 3,50 says "hi" Thé 2',
    }


def epub():
    chapters = [("One", "The ship left the harbour at dawn."), ("Two", "By noon the coast was gone.")]
    path = OUT / "voyage.epub"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        manifest = "".join(f'<item id="c{i}" href="text/ch{i}.xhtml" media-type="application/xhtml+xml"/>' for i in range(len(chapters)))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        z.writestr("OEBPS/content.opf", f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The voyage</dc:title><dc:creator>Jules Verne</dc:creator></metadata><manifest>{manifest}</manifest><spine>{spine}</spine></package>')
        for i, (title, text) in enumerate(chapters):
            z.writestr(f"OEBPS/text/ch{i}.xhtml", f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title></head><body><h1>Chapter {title}</h1><p>{text}</p></body></html>')
    truth["voyage.epub"] = {
        "mime": MIME["epub"], "title": "The voyage", "author": "Jules Verne",
        "words": words(*(f"Chapter {t} {x}" for t, x in chapters)),
    }


def hostile():
    # A zip bomb: an OpenDocument whose content.xml inflates 64 MiB of one repeated byte.
    with zipfile.ZipFile(OUT / "bomb.ods", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", MIME["ods"], compress_type=zipfile.ZIP_STORED)
        with z.open("content.xml", "w") as part:
            chunk = b" " * (1 << 20)
            for _ in range(64):
                part.write(chunk)
    truth["bomb.ods"] = {"mime": MIME["ods"]}
    import msoffcrypto
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = io.BytesIO((OUT / "prices.xlsx").read_bytes())
    sealed = io.BytesIO()
    OOXMLFile(plain).encrypt("secret", sealed)
    (OUT / "sealed.xlsx").write_bytes(sealed.getvalue())
    truth["sealed.xlsx"] = {"mime": MIME["xlsx"]}


for make in (docx, xlsx, pptx, odt, ods, csv_file, epub, hostile):
    make()
json.dump(truth, sys.stdout)
