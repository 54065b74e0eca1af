import { LabIcon } from '@jupyterlab/ui-components';

import iconSvg from '../style/icon.svg';

/** The Dask Profile icon: three rows of task rectangles. */
export const daskProfileIcon = new LabIcon({
  name: 'daskprofile:icon',
  svgstr: iconSvg
});
