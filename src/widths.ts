/**
 * How wide the panel opens in a sidebar. A sidebar opens at ~250 px in JupyterLab, where
 * the task stream is a few pixels wide; the panel asks for a width where it is readable,
 * taken from the main area. Pure (no DOM, no Lumino) and unit-tested; `sidebarWidth.ts`
 * applies it to the shell.
 */

/** Narrowest sidebar in which the task stream is readable, px. */
export const MIN_READABLE = 420;
/** Share of the window the panel takes in a sidebar when the window is wide. */
export const READABLE_SHARE = 0.35;
/** Widest the panel opens on its own, px: wider is the user's call. */
export const MAX_OPENING = 640;
/** Width the main area (the notebook) keeps when the sidebar grows, px. */
export const MIN_MAIN = 400;

/** The width the panel opens at in a sidebar of a window `windowWidth` px wide. */
export function readableWidth(windowWidth: number): number {
  const share = Math.round(READABLE_SHARE * windowWidth);
  return Math.min(MAX_OPENING, Math.max(MIN_READABLE, share));
}

/**
 * How many px a sidebar `width` px wide grows to reach `target`, taken from the main area
 * (`main` px wide), which keeps at least `minMain` px. 0 when it is wide enough already or
 * the main area has nothing to give.
 */
export function widening(
  width: number,
  main: number,
  target: number,
  minMain: number = MIN_MAIN
): number {
  const grow = Math.floor(Math.min(target - width, main - minMain));
  return grow >= 1 ? grow : 0;
}

/**
 * Whether a width the user dragged the sidebar to (while the panel showed in it) is one
 * to keep: narrower than the panel would open at. A wider one needs no keeping.
 */
export function keepsUserWidth(width: number, windowWidth: number): boolean {
  return width > 0 && width < readableWidth(windowWidth) - 1;
}
