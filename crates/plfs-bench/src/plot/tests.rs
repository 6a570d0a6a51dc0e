//! The figure model drawn for real: PNG files decoded and looked at pixel
//! by pixel (no golden images: fonts and anti-aliasing vary by host).

use super::*;

fn spread(median: f64, min: f64, max: f64) -> Spread {
    Spread { median, min, max }
}

fn bars() -> Figure {
    Figure {
        name: "bars".to_owned(),
        title: "n1-strided: 4 processes".to_owned(),
        x_label: "how the file is written".to_owned(),
        y_label: MIBS.to_owned(),
        x_axis: XAxis::Categories(vec!["direct N-1".into(), "N-N".into(), "plfs".into()]),
        series: vec![
            Series {
                name: "write".into(),
                points: vec![
                    Point::of(0.0, spread(100.0, 80.0, 120.0)),
                    Point::of(1.0, spread(300.0, 280.0, 310.0)),
                    Point::of(2.0, spread(290.0, 250.0, 330.0)),
                ],
            },
            Series { name: "read".into(), points: vec![Point::single(2.0, 900.0)] },
        ],
    }
}

fn lines() -> Figure {
    Figure {
        name: "lines".to_owned(),
        title: "open time against processes".to_owned(),
        x_label: "processes".to_owned(),
        y_label: "open time (s)".to_owned(),
        x_axis: XAxis::Log2,
        series: ["naive", "parallel"]
            .iter()
            .enumerate()
            .map(|(i, name)| Series {
                name: (*name).to_owned(),
                points: [1.0, 2.0, 4.0, 8.0, 16.0]
                    .iter()
                    .map(|&n| Point::of(n, spread(n / (i + 1) as f64, n * 0.8 / (i + 1) as f64, n * 1.3)))
                    .collect(),
            })
            .collect(),
    }
}

fn decode(path: &Path) -> image::RgbImage {
    image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_rgb8()
}

fn count(image: &image::RgbImage, colour: RGBColor) -> usize {
    image.pixels().filter(|p| p.0 == [colour.0, colour.1, colour.2]).count()
}

#[test]
fn a_figure_becomes_a_png_of_the_panel_size_with_its_series_drawn() {
    let dir = tempfile::tempdir().unwrap();
    for figure in [bars(), lines()] {
        let path = dir.path().join(format!("{}.png", figure.name));
        write_png(&path, std::slice::from_ref(&figure)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
        let image = decode(&path);
        assert_eq!(image.dimensions(), (PANEL_WIDTH, PANEL_HEIGHT));
        let background = image.pixels().filter(|p| p.0 == [255, 255, 255]).count();
        let total = (PANEL_WIDTH * PANEL_HEIGHT) as usize;
        assert!(background < total * 97 / 100, "{}: almost blank ({background} of {total})", figure.name);
        // Both series are drawn in their own colours (bars and markers
        // are filled with it; the legend alone is far smaller).
        for index in 0..figure.series.len() {
            let pixels = count(&image, colour(index));
            assert!(pixels > 400, "{}: series {index} has {pixels} pixels", figure.name);
        }
        // Text is drawn: the font was found and anti-aliased grey appears.
        let grey =
            image.pixels().filter(|p| p.0[0] == p.0[1] && p.0[1] == p.0[2] && (60..200).contains(&p.0[0]));
        assert!(grey.count() > 500, "{}: no text drawn", figure.name);
    }
}

#[test]
fn several_figures_share_one_png_two_panels_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.png");
    write_png(&path, &[bars(), lines(), bars()]).unwrap();
    let image = decode(&path);
    assert_eq!(image.dimensions(), (2 * PANEL_WIDTH, 2 * PANEL_HEIGHT));
    // The third panel (bottom left) has bars; the fourth is left blank.
    let bottom_left =
        image::imageops::crop_imm(&image, 0, PANEL_HEIGHT, PANEL_WIDTH, PANEL_HEIGHT).to_image();
    assert!(count(&bottom_left, colour(0)) > 400);
    let bottom_right =
        image::imageops::crop_imm(&image, PANEL_WIDTH, PANEL_HEIGHT, PANEL_WIDTH, PANEL_HEIGHT).to_image();
    assert!(bottom_right.pixels().all(|p| p.0 == [255, 255, 255]));
}

#[test]
fn a_report_directory_holds_every_png_and_a_markdown_table_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let report_dir = dir.path().join("new").join("report");
    let written =
        write_report(&report_dir, "plfs bench test", "the text report\n", &[bars(), lines()]).unwrap();
    assert_eq!(written, vec![report_dir.join("bars.png"), report_dir.join("lines.png")]);
    let markdown = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    for (file, title) in
        [("bars.png", "n1-strided: 4 processes"), ("lines.png", "open time against processes")]
    {
        assert!(report_dir.join(file).is_file(), "{file}");
        assert!(markdown.contains(&format!("![{title}]({file})")), "{markdown}");
    }
    assert!(markdown.starts_with("# plfs bench test\n"), "{markdown}");
    assert!(markdown.contains("the text report"), "{markdown}");
    // The numbers are there, with the range of the runs when there was one.
    assert!(markdown.contains("| write | 100 (80–120) | 300 (280–310) | 290 (250–330) |"), "{markdown}");
    assert!(markdown.contains("| read | – | – | 900 |"), "{markdown}");
    assert!(markdown.contains("| open time (s) \\ processes | 1 | 2 | 4 | 8 | 16 |"), "{markdown}");
}

#[test]
fn bad_names_and_empty_runs_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let jpeg = dir.path().join("figure.jpg");
    let error = write_png(&jpeg, &[bars()]).unwrap_err().to_string();
    assert!(error.contains("figure.jpg") && error.contains(".png"), "{error}");
    let empty = dir.path().join("empty.png");
    let error = write_png(&empty, &[]).unwrap_err().to_string();
    assert!(error.contains("empty.png") && error.contains("nothing to plot"), "{error}");
    assert!(!jpeg.exists() && !empty.exists());
    let twice = write_report(dir.path(), "t", "", &[bars(), bars()]).unwrap_err().to_string();
    assert!(twice.contains("\"bars\""), "{twice}");
}

#[test]
fn an_unwritable_place_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("figure.png");
    let error = write_png(&path, &[bars()]).unwrap_err().to_string();
    assert!(error.contains(&path.display().to_string()), "{error}");
}
