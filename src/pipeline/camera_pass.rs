//! Pass 4, the RGB class check: for each track, the views its classifier looks at (its boxes'
//! best views with the largest visible area, in different frames), reading those images again
//! from the source, classifying them, and the track's vote compared with each box's class.
//!
//! The check is per track because the class is: a track's boxes share one object, and its few
//! clearest views say more than every frame's view, at a fraction of the image decoding.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::PipelineError;
use super::config::{CameraConfig, ReviewConfig};
use super::sequence::FrameContext;
use crate::classify::{Classifier, NoVerdict, PixelRect, RgbClass, RgbVerdict};
use crate::frame::ObjectClass;
use crate::shards::BoxRow;
use crate::sources::Source;

/// The RGB class check over one sequence's box rows.
pub(super) struct CameraCheck<'a> {
    /// The image model.
    pub(super) classifier: &'a Classifier,
    /// Views per track, occlusion limit, conflict score.
    pub(super) config: &'a CameraConfig,
    /// Whether `class_conflict` puts a box in the review queue.
    pub(super) review: &'a ReviewConfig,
}

/// Why a track got no verdict, in order of precedence (the first that applies is the note).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Note {
    NoCamera,
    OutOfView,
    TooSmall,
    NoPoints,
    Occluded,
    NoImage,
    Unmatched,
}

impl Note {
    fn as_str(self) -> &'static str {
        match self {
            Note::NoCamera => "no_camera",
            Note::OutOfView => "out_of_view",
            Note::TooSmall => "too_small",
            Note::NoPoints => "no_points",
            Note::Occluded => "occluded",
            Note::NoImage => "no_image",
            Note::Unmatched => "unmatched",
        }
    }
}

/// A view's outcome: the row it belongs to and the classifier's verdict or why there is none.
type ViewOutcome = (usize, Result<RgbVerdict, Note>);

/// One view to classify: the row it comes from and its footprint in the best camera.
#[derive(Debug, Clone)]
struct View {
    row: usize,
    camera: String,
    rect: PixelRect,
}

/// The best-camera footprint of a row: camera, clipped 2D box, the box's occlusion there and the
/// share of its projection inside the image.
fn best_footprint(row: &BoxRow) -> Option<(&str, PixelRect, Option<f64>, f64)> {
    let camera = row.best_camera.as_deref()?;
    let footprint = row.cameras.iter().find(|c| c.camera == camera)?;
    Some((
        camera,
        footprint.box_2d_px?,
        footprint.occlusion,
        footprint.in_image_fraction,
    ))
}

fn area(r: &PixelRect) -> f64 {
    (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0)
}

impl CameraCheck<'_> {
    /// Chooses each track's views, classifies them and writes `rgb_class`, `rgb_score`,
    /// `rgb_agrees`, `rgb_note` and the `class_conflict` flag into `rows`.
    pub(super) fn run(
        &self,
        sequence: &str,
        source: &dyn Source,
        contexts: &[FrameContext],
        rows: &mut [BoxRow],
    ) -> Result<(), PipelineError> {
        let position_of: BTreeMap<i64, &FrameContext> = contexts.iter().map(|c| (c.row.frame_index, c)).collect();
        let mut by_track: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            by_track.entry(r.track_id).or_default().push(i);
        }
        // Choose the views.
        let min_side = self.classifier.manifest().crop.min_side_px;
        let mut notes: BTreeMap<i64, Note> = BTreeMap::new();
        let mut wanted: BTreeMap<usize, Vec<View>> = BTreeMap::new();
        for (&track, members) in &by_track {
            let mut candidates: Vec<(f64, usize, &str, PixelRect)> = Vec::new();
            let mut note = Note::NoCamera;
            for &i in members {
                let r = &rows[i];
                if r.cameras.is_empty() {
                    continue;
                }
                let Some((camera, rect, occlusion, in_image)) = best_footprint(r) else {
                    note = note.max(Note::OutOfView);
                    continue;
                };
                // A box cut by the image border shows the classifier a part of the object.
                if in_image < self.config.min_view_in_image {
                    note = note.max(Note::OutOfView);
                    continue;
                }
                if rect[2] - rect[0] < min_side || rect[3] - rect[1] < min_side {
                    note = note.max(Note::TooSmall);
                    continue;
                }
                // Without LiDAR returns in the box the frame does not show the object is there
                // to be seen (out of range, behind terrain): its crop may be of something else.
                // A label's own count stands in where the frame's points are not at hand.
                let returns = r.num_points_inside.max(r.source_num_points.unwrap_or(0));
                if returns < i64::from(self.config.min_view_points) {
                    note = note.max(Note::NoPoints);
                    continue;
                }
                let occlusion = occlusion.unwrap_or(0.0);
                if occlusion > self.config.max_view_occlusion {
                    note = note.max(Note::Occluded);
                    continue;
                }
                candidates.push((area(&rect) * (1.0 - occlusion), i, camera, rect));
            }
            candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut frames_used = Vec::new();
            for (_, i, camera, rect) in candidates {
                if frames_used.len() == self.config.views_per_track {
                    break;
                }
                let frame = rows[i].frame_index;
                if frames_used.contains(&frame) {
                    continue;
                }
                frames_used.push(frame);
                let Some(ctx) = position_of.get(&frame) else {
                    continue;
                };
                wanted.entry(ctx.position).or_default().push(View {
                    row: i,
                    camera: camera.to_string(),
                    rect,
                });
            }
            if frames_used.is_empty() {
                notes.insert(track, note);
            }
        }
        // Read and classify, frame by frame in parallel.
        let rows_ref: &[BoxRow] = rows;
        let results: Vec<Vec<ViewOutcome>> = wanted
            .into_par_iter()
            .map(|(position, views)| self.classify_frame(sequence, source, position, views, rows_ref))
            .collect::<Result<_, _>>()?;
        let mut verdicts: BTreeMap<i64, Vec<Result<RgbVerdict, Note>>> = BTreeMap::new();
        for (i, v) in results.into_iter().flatten() {
            verdicts.entry(rows[i].track_id).or_default().push(v);
        }
        // Vote per track and write the rows.
        for (track, members) in &by_track {
            let outcome = match verdicts.get(track) {
                Some(v) => vote(v),
                None => Err(notes.get(track).copied().unwrap_or(Note::NoCamera)),
            };
            for &i in members {
                let r = &mut rows[i];
                match outcome {
                    Ok(verdict) => {
                        let agrees = r
                            .class
                            .parse::<ObjectClass>()
                            .is_ok_and(|c| RgbClass::from(c) == verdict.class);
                        r.rgb_class = Some(verdict.class.as_str().to_string());
                        r.rgb_score = Some(f64::from(verdict.score));
                        r.rgb_agrees = Some(agrees);
                        r.rgb_note = None;
                        if !agrees && f64::from(verdict.score) >= self.config.conflict_score {
                            r.flags.push("class_conflict".to_string());
                            if r.review_status == "auto" && self.review.queues(&r.flags) {
                                r.review_status = "flagged".to_string();
                            }
                        }
                    }
                    Err(note) => {
                        r.rgb_note = Some(note.as_str().to_string());
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads one frame's images and classifies its views. A frame or image that cannot be read
    /// now (it was read in pass 1) costs its views (`no_image`), not the run; a model failure is
    /// an error.
    fn classify_frame(
        &self,
        sequence: &str,
        source: &dyn Source,
        position: usize,
        views: Vec<View>,
        rows: &[BoxRow],
    ) -> Result<Vec<ViewOutcome>, PipelineError> {
        let frame = views.first().map_or(0, |v| rows[v.row].frame_index);
        let cameras = match source.cameras(position) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("{sequence}: frame {frame}: images not read for the RGB check: {e}");
                return Ok(views.into_iter().map(|v| (v.row, Err(Note::NoImage))).collect());
            }
        };
        let mut by_camera: BTreeMap<&str, Vec<&View>> = BTreeMap::new();
        for v in &views {
            by_camera.entry(v.camera.as_str()).or_default().push(v);
        }
        let mut out = Vec::with_capacity(views.len());
        for (camera, views) in by_camera {
            let image = match cameras.iter().find(|c| c.name == camera).map(|c| c.image()) {
                Some(Ok(image)) => image,
                Some(Err(e)) => {
                    tracing::warn!("{sequence}: frame {frame}: {e}; its boxes are not checked there");
                    out.extend(views.iter().map(|v| (v.row, Err(Note::NoImage))));
                    continue;
                }
                None => {
                    tracing::warn!("{sequence}: frame {frame}: camera `{camera}` has no image");
                    out.extend(views.iter().map(|v| (v.row, Err(Note::NoImage))));
                    continue;
                }
            };
            let rects: Vec<PixelRect> = views.iter().map(|v| v.rect).collect();
            let checked = self
                .classifier
                .check(&image, &rects)
                .map_err(|e| PipelineError::Config(format!("{sequence}: frame {frame}: camera `{camera}`: {e}")))?;
            out.extend(views.iter().zip(checked).map(|(v, c)| {
                (
                    v.row,
                    c.map_err(|n| match n {
                        NoVerdict::TooSmall => Note::TooSmall,
                        NoVerdict::Unmatched => Note::Unmatched,
                    }),
                )
            }));
        }
        Ok(out)
    }
}

/// A track's vote: the class with the largest summed score over its views; the score is that sum
/// over the number of views with a verdict (a view that saw another class counts 0). With no
/// verdict, the note of the first failed view.
fn vote(views: &[Result<RgbVerdict, Note>]) -> Result<RgbVerdict, Note> {
    let mut sums: Vec<(RgbClass, f32)> = Vec::new();
    let mut n = 0usize;
    for v in views.iter().flatten() {
        n += 1;
        match sums.iter_mut().find(|(c, _)| *c == v.class) {
            Some((_, s)) => *s += v.score,
            None => sums.push((v.class, v.score)),
        }
    }
    let best = sums
        .iter()
        .fold(None, |best: Option<(RgbClass, f32)>, &(c, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((c, s)),
        });
    match best {
        Some((class, sum)) => Ok(RgbVerdict {
            class,
            score: sum / n as f32,
        }),
        None => Err(views.iter().find_map(|v| v.err()).unwrap_or(Note::NoImage)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(class: RgbClass, score: f32) -> Result<RgbVerdict, Note> {
        Ok(RgbVerdict { class, score })
    }

    #[test]
    fn the_vote_sums_scores_and_spreads_them_over_every_view() {
        let v = vote(&[
            verdict(RgbClass::Vehicle, 0.9),
            verdict(RgbClass::Pedestrian, 0.8),
            verdict(RgbClass::Vehicle, 0.6),
            Err(Note::NoImage),
        ])
        .unwrap();
        assert_eq!(v.class, RgbClass::Vehicle);
        approx::assert_abs_diff_eq!(v.score, 0.5, epsilon = 1e-6);
        // A tie keeps the first class seen.
        let v = vote(&[verdict(RgbClass::Background, 0.7), verdict(RgbClass::Cyclist, 0.7)]).unwrap();
        assert_eq!(v.class, RgbClass::Background);
        assert_eq!(vote(&[Err(Note::TooSmall), Err(Note::NoImage)]), Err(Note::TooSmall));
    }
}
