/**
 * Entry point of the standalone inline bundle (esbuild: an IIFE in
 * python/daskprofile/jupyter/static/inline.js). The kernel side writes, per notebook
 * output, a container holding the run's data as JSON, followed by a `<script>` with this
 * bundle: when it runs, it mounts the view in the container just before it (or, where the
 * script cannot tell which it is, in every container not mounted yet). No network, no
 * JupyterLab: it renders the same in JupyterLab, in an exported HTML file and offline.
 */

// inline.css with its imports (the panel's stylesheet), bundled by `jlpm build:inline`
import css from '../../lib/inline.css';
import { parsePayload } from './payload';
import { InlineView } from './view';

/** Class of the container the kernel side writes. */
const CONTAINER = 'daskprofile-inline';
/** Class of the JSON `<script>` inside it. */
const DATA = 'daskprofile-inline-data';

/** Mount the view in `container` (once); errors are shown in place and logged. */
export function mount(container: HTMLElement): InlineView | null {
  if (container.dataset.mounted) {
    return null;
  }
  container.dataset.mounted = 'true';
  const script = container.querySelector(`script.${DATA}`);
  try {
    if (!script) {
      throw new Error('daskprofile: the inline view has no data');
    }
    const payload = parsePayload(script.textContent ?? '');
    const root = document.createElement('div');
    container.replaceChildren(root);
    return new InlineView(root, payload, css);
  } catch (reason) {
    console.warn('daskprofile: could not show the inline view:', reason);
    const message = document.createElement('div');
    message.className = 'daskprofile-inline-error';
    message.textContent = `daskprofile: could not show this view (${String(reason)})`;
    container.replaceChildren(message);
    return null;
  }
}

/** The container this script belongs to (the element just before it), else all pending. */
function containers(): HTMLElement[] {
  const script = document.currentScript;
  const before = script?.previousElementSibling;
  if (before instanceof HTMLElement && before.classList.contains(CONTAINER)) {
    return [before];
  }
  return Array.from(
    document.querySelectorAll<HTMLElement>(`.${CONTAINER}:not([data-mounted])`)
  );
}

containers().forEach(mount);
