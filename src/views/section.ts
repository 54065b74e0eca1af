/** A `<details>` section of the panel and the inline view, named for tests (`data-section`). */
export function section(
  name: string,
  label: string,
  open: boolean,
  ...content: HTMLElement[]
): HTMLDetailsElement {
  const details = document.createElement('details');
  details.className = 'jp-DaskProfile-section';
  details.dataset.section = name;
  details.open = open;
  const summary = document.createElement('summary');
  summary.textContent = label;
  details.append(summary, ...content);
  return details;
}
