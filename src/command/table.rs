//! Plain-text tables for the terminal: left-aligned columns, two spaces apart.

/// Prints `rows` (the header first) with every column as wide as its widest cell.
pub fn print<R: AsRef<[String]>>(rows: &[R]) {
    for line in lines(rows) {
        println!("{line}");
    }
}

/// The lines [`print`] prints.
pub fn lines<R: AsRef<[String]>>(rows: &[R]) -> Vec<String> {
    let columns = rows.first().map_or(0, |r| r.as_ref().len());
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.as_ref()[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let line: Vec<String> = row
                .as_ref()
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            line.join("  ").trim_end().to_owned()
        })
        .collect()
}
